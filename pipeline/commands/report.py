"""``tasksieve report OUT_DIR``: (re)write the HTML report of an existing curate output.

The top level imports the standard library only (the CLI builds its parser from here);
pyarrow, pydantic and matplotlib come in when the command runs (``pipeline.outputs.report.page``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

EXIT_OK = 0
EXIT_USAGE = 2  # OUT_DIR is missing or not a finished tasksieve curate output


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the ``report`` sub-command."""
    p = sub.add_parser(
        "report",
        help="write the HTML report (funnel, pass rates, sample rollouts) of a curate output",
        description="Reads OUT_DIR/manifest.json and its Parquet shards (and checks.json when "
        "present) and writes one self-contained HTML page; curate writes the same page as "
        "OUT_DIR/report.html.",
        epilog="exit status: 0 written, 2 OUT_DIR is missing or not a finished curate output",
    )
    p.add_argument("out_dir", metavar="OUT_DIR", help="output directory of tasksieve curate")
    p.add_argument(
        "--output",
        metavar="FILE",
        help="where to write the page (default OUT_DIR/report.html)",
    )


def run(args: argparse.Namespace) -> int:
    """Write the report; print its path, or one error line and exit 2."""
    out_dir = Path(args.out_dir)
    from tasksieve.pipeline.outputs.layout import NotAnOutput
    from tasksieve.pipeline.outputs.report.page import write_report

    try:
        path = write_report(out_dir, Path(args.output) if args.output else None)
    except NotAnOutput as e:
        print(f"tasksieve report: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as e:
        print(f"tasksieve report: error: cannot write the report: {e}", file=sys.stderr)
        return EXIT_USAGE
    print(path)
    return EXIT_OK
