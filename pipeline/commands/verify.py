"""``tasksieve verify``: run solutions against tasks in the sandbox and print the verdicts.

One solution (``--solution FILE``) prints one verdict; a batch (``--solutions DIR|FILE``)
verifies every solution through one warm sandbox and prints one verdict per line, in input
order, plus a summary line on stderr. This module holds the flags and the exit codes and
imports the standard library only (the CLI builds its parser from here); the command runs
in ``tasksieve.pipeline.commands.verify_run``, which the CLI imports only then.
"""

from __future__ import annotations

import argparse

from tasksieve.pipeline.flags.repo import add_snapshot_store_flag
from tasksieve.pipeline.flags.shared import FORMATS, positive_int

EXIT_PASS = 0  # every verdict is pass
EXIT_FAIL = 1  # some verdict is fail, error or timeout (a wrong solution)
EXIT_USAGE = 2  # bad flags or input (nothing verified), or no usable sandbox
EXIT_INFRA = 3  # some verdict is infra_error (the environment broke; says nothing of the code)

_EPILOG = """\
solutions (--solutions):
  DIR        every file in DIR is a solution; its task is --task-id, else the task file's
             only task, else the task whose id is the file name less its extension
             (DIR/code.add.py -> code.add); files in DIR/TASK_ID/ are solutions of TASK_ID
  FILE       .jsonl[.gz], .json or .parquet rows {"task_id": ID, "solution": TEXT}
             ("task_id" may be left out when the task is known as above; an optional
             "name" names the row in the output, default FILE:LINE)

output:
  json  (default) --solution: one JSON object with task_id and the verdict's fields;
        --solutions: JSON Lines, one object per solution with name, task_id and the
        verdict's fields (status, tests_passed, tests_total, detail, checks, duration_s,
        limit_hit, trace)
  text  one line per solution: NAME: TASK_ID: STATUS (PASSED/TOTAL)[: detail]
  A batch ends with a summary line on stderr; input problems are listed there as
  FILE[:LINE]: message, before anything runs.

exit status: 0 every verdict pass, 1 some fail/error/timeout, 2 usage or input error
(nothing verified) or no usable sandbox, 3 some infra_error (the environment broke)
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the ``verify`` sub-command."""
    p = sub.add_parser(
        "verify",
        help="run solutions against tasks in the sandbox, print the verdicts as JSON",
        description="Verify one solution (--solution) or many through one warm sandbox "
        "(--solutions).",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--task", required=True, help="task file: JSON object, or JSONL/Parquet")
    p.add_argument("--task-id", help="which task of a multi-record file (for every solution)")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--solution", help="file with one solution ('-': stdin)")
    which.add_argument(
        "--solutions",
        metavar="DIR_OR_FILE",
        help="many solutions: a directory of files, or JSONL/JSON/Parquet rows (see below)",
    )
    p.add_argument(
        "--jobs",
        "-j",
        type=positive_int,
        default=None,
        metavar="N",
        help="solutions verified at once by --solutions (default: the number of CPUs)",
    )
    p.add_argument(
        "--group",
        type=positive_int,
        default=8,
        metavar="K",
        help="consecutive solutions of one task verified together by --solutions, in one "
        "sandbox entry where the family and sandbox allow it (default 8; 1: one by one)",
    )
    p.add_argument("--sandbox", default="process", help="sandbox backend (default: process)")
    p.add_argument("--allow-weak-isolation", action="store_true")
    add_snapshot_store_flag(p)
    p.add_argument(
        "--format", choices=FORMATS, default="json", help="verdict format (default json)"
    )
