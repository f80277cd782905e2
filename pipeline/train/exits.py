"""Exit statuses of ``tasksieve train`` (shared by its parser and its runner)."""

EXIT_OK = 0
EXIT_USAGE = 2  # bad flags or input: nothing trained
EXIT_INFRA = 3  # verification kept hitting infra errors: the step failed, nothing scored 0
