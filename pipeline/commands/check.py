"""``tasksieve check OUT_DIR``: run the data-quality suites on a curate output.

The top level imports the standard library only (the CLI builds its parser from here); Great
Expectations, pandas and pyarrow come in when the command runs (``pipeline.outputs.checks.run``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from tasksieve.pipeline.flags.shared import add_format_flag

if TYPE_CHECKING:
    from tasksieve.pipeline.outputs.checks.run import CheckItem, CheckResult

EXIT_PASS = 0  # every expectation passed
EXIT_FAIL = 1  # some expectation failed
EXIT_USAGE = 2  # no such directory, or not a tasksieve curate output

_EPILOG = """\
Writes OUT_DIR/checks.json (the results) and OUT_DIR/gx/ (Great Expectations Data Docs:
open OUT_DIR/gx/index.html).

output:
  text  (default) the failed expectations: suite, expectation, column, failing rows, detail
  json  the content of checks.json: {"success": bool, "results": [{"suite", "expectation",
        "column", "success", "unexpected_count", "element_count", "detail"}]}

exit status: 0 every expectation passed, 1 some expectation failed, 2 no such directory or
not a tasksieve curate output
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the ``check`` sub-command."""
    p = sub.add_parser(
        "check",
        help="run the data-quality expectations on a curate output",
        description="Check a curate output's shards against its manifest with Great "
        "Expectations; write checks.json and Data Docs into it.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("out_dir", metavar="OUT_DIR", help="a tasksieve curate output directory")
    add_format_flag(p, "results on stdout: a table of failures (text) or checks.json (json)")


def _rows(item: CheckItem) -> str:
    return "-" if item.unexpected_count is None else str(item.unexpected_count)


def failure_table(failures: list[CheckItem]) -> str:
    """Plain-text table of failed expectations (one line each)."""
    header = ("suite", "expectation", "column", "rows", "detail")
    lines = [(f.suite, f.expectation, f.column or "-", _rows(f), f.detail) for f in failures]
    widths = [max(len(r[i]) for r in [header, *lines]) for i in range(4)]
    out = []
    for row in [header, *lines]:
        cells = [c.ljust(w) for c, w in zip(row[:4], widths, strict=True)]
        out.append("  ".join([*cells, row[4]]))
    return "\n".join(out)


def summary(result: CheckResult) -> str:
    """One line: how many expectations failed, and where the files went."""
    failed = len(result.failures())
    head = "all passed" if not failed else f"{failed} failed"
    return (
        f"{len(result.results)} expectations, {head}; results in {result.checks_json}, "
        f"Data Docs in {result.docs_index}"
    )


def run(args: argparse.Namespace) -> int:
    """Entry point of ``tasksieve check``."""
    from tasksieve.pipeline.outputs.checks.run import check_output
    from tasksieve.pipeline.outputs.layout import NotAnOutput

    try:
        result = check_output(Path(args.out_dir))
    except NotAnOutput as exc:
        print(f"tasksieve check: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.format == "json":
        print(json.dumps(result.as_json()))
    else:
        if result.failures():
            print(failure_table(result.failures()))
        print(summary(result), file=sys.stderr)
    return EXIT_PASS if result.success else EXIT_FAIL
