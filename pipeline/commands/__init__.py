"""One module per ``tasksieve`` subcommand: parse, build a config, call the library, report."""
