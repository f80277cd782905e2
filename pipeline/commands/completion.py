"""``tasksieve completion bash|zsh|fish``: print a shell completion script.

The script is generated from the real parser by shtab, so it completes every subcommand,
flag and ``choices`` value; arguments that take paths complete file or directory names.
Install it the usual way for the shell (see ``tasksieve completion -h``). The script is
static: flags added later need the script regenerated.
"""

from __future__ import annotations

import argparse
import sys

SHELLS = ("bash", "zsh", "fish")

# Argument destinations that name files or directories, completed as such by the shell.
FILE_DESTS = frozenset(
    {"input", "paths", "task", "solution", "solutions", "replay", "benchmark", "sql_file"}
)
DIR_DESTS = frozenset({"output", "index", "dedup_index", "model", "out_dir", "rollout_cache"})

_EPILOG = """\
install:
  bash  tasksieve completion bash > ~/.local/share/bash-completion/completions/tasksieve
        (or: eval "$(tasksieve completion bash)" in ~/.bashrc)
  zsh   tasksieve completion zsh > "${fpath[1]}/_tasksieve"   (then: compinit)
  fish  tasksieve completion fish > ~/.config/fish/completions/tasksieve.fish
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the ``completion`` sub-command."""
    p = sub.add_parser(
        "completion",
        help="print a shell completion script (bash, zsh or fish)",
        description="Print a completion script for SHELL on stdout.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("shell", choices=SHELLS, metavar="SHELL", help=" | ".join(SHELLS))


def _subparsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """``parser`` and every parser below it."""
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):
                found.extend(_subparsers(child))
    return found


def mark_paths(parser: argparse.ArgumentParser) -> None:
    """Tell shtab which arguments complete as file or directory names."""
    import shtab

    for p in _subparsers(parser):
        for action in p._actions:
            if action.dest in DIR_DESTS:
                action.complete = shtab.DIRECTORY  # type: ignore[attr-defined]
            elif action.dest in FILE_DESTS:
                action.complete = shtab.FILE  # type: ignore[attr-defined]


def script(parser: argparse.ArgumentParser, shell: str) -> str:
    """The completion script for ``shell`` (one of SHELLS) of ``parser``."""
    import shtab

    mark_paths(parser)
    return shtab.complete(parser, shell=shell)


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """Print the script for ``args.shell``; exit 2 when shtab is missing."""
    try:
        text = script(parser, args.shell)
    except ImportError:
        print("tasksieve completion: error: needs shtab (pip install shtab)", file=sys.stderr)
        return 2
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0
