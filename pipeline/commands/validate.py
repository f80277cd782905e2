"""``tasksieve validate``: schema-check task files without running the pipeline (for CI).

Streams every record of every input, prints one line per problem and a one-line summary on
stderr. Exit status: 0 all records valid, 1 some record invalid (or a duplicate id),
2 usage or input error (missing path, unreadable or corrupt file). An empty input file is a
warning on stderr, not an error. Memory grows only with the number of distinct ids (kept to
report duplicates), never with the records themselves.

The top level imports the standard library only (the CLI builds its parser from here); the
schema and the readers come in when the command runs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, TextIO

from tasksieve.pipeline.flags.shared import positive_int

if TYPE_CHECKING:
    from tasksieve.schemas.validation import Problem

PROG = "tasksieve validate"
_EPILOG = """\
output:
  text  one line per problem: path:line: task_id: field: message
        (task_id "-" when unknown, field "-" for whole-record problems; fields are
        dotted paths such as verifier.io_cases.0.stdout)
  json  JSON Lines: one object per problem with keys path, line, task_id, field, message
In both formats the summary and warnings go to stderr.

exit status: 0 all valid, 1 some record invalid or a duplicate id, 2 usage or input error
"""


def _add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "paths",
        nargs="+",
        metavar="PATH",
        help="files, directories (searched recursively) or globs (** allowed): "
        "*.jsonl[.gz], *.json, *.parquet, datasets.save_to_disk directories",
    )
    p.add_argument("--format", choices=("text", "json"), default="text", help="problem format")
    p.add_argument(
        "--max-problems",
        type=positive_int,
        default=None,
        metavar="N",
        help="print at most N problems (all records are still checked and counted)",
    )


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register the ``validate`` sub-command."""
    p = subparsers.add_parser(
        "validate",
        help="check task files against the schema",
        description="Check task files against the TaskRecord schema, one line per problem.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_arguments(p)
    p.set_defaults(func=run)


@dataclass
class _Report:
    """Counts and problem output for one validate run."""

    out: TextIO
    fmt: str
    limit: int | None
    records: int = 0
    invalid: int = 0
    problems: int = 0

    def emit(self, problems: list[Problem]) -> None:
        for problem in problems:
            self.problems += 1
            if self.limit is not None and self.problems > self.limit:
                continue
            if self.fmt == "json":
                self.out.write(json.dumps(asdict(problem), ensure_ascii=False) + "\n")
            else:
                self.out.write(problem.format() + "\n")

    def summary(self, files: int, empty: int) -> str:
        counts = f"{_n(self.records, 'record')}, {self.invalid} invalid"
        text = f"{PROG}: {counts}, in {_n(files, 'file')}"
        if empty:
            text += f" ({empty} empty)"
        if self.problems:
            text += f"; {_n(self.problems, 'problem')}"
            if self.limit is not None and self.problems > self.limit:
                text += f", {self.problems - self.limit} not shown"
        return text


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _check(paths: list[str], report: _Report, err: TextIO) -> int:
    """Validate every record of every path; return the number of empty inputs."""
    from tasksieve.schemas.validation import Problem, display_id, record_id, validate_record
    from tasksieve.transforms.ingest.readers import iter_source_records

    seen: dict[str, tuple[int, int]] = {}
    empty = 0
    for index, path in enumerate(paths):
        before = report.records
        for rec in iter_source_records(path):
            report.records += 1
            _task, problems = validate_record(rec.source_file, rec.line, rec.data, rec.error)
            rid = record_id(rec.data)
            if rid is not None:
                first = seen.setdefault(rid, (index, rec.line))
                if first != (index, rec.line):
                    msg = f"duplicate id, first seen at {paths[first[0]]}:{first[1]}"
                    tid = display_id(rec.data)
                    problems.append(Problem(rec.source_file, rec.line, tid, "id", msg))
            if problems:
                report.invalid += 1
                report.emit(problems)
        if report.records == before:
            empty += 1
            err.write(f"{PROG}: warning: {path}: empty input\n")
    return empty


def run(args: argparse.Namespace) -> int:
    """Run ``validate`` for parsed arguments; return the exit status (0, 1 or 2)."""
    from tasksieve.transforms.ingest.files import InputError, expand_inputs

    out, err = sys.stdout, sys.stderr
    report = _Report(out, args.format, args.max_problems)
    try:
        paths = expand_inputs(args.paths)
        empty = _check(paths, report, err)
    except InputError as e:
        out.flush()
        err.write(f"{PROG}: error: {e}\n")
        return 2
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, out.fileno())  # stop Python complaining at exit
        return 1
    out.flush()
    err.write(report.summary(len(paths), empty) + "\n")
    return 1 if report.invalid else 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point for ``python -m tasksieve.pipeline.commands.validate PATH...``."""
    parser = argparse.ArgumentParser(
        prog="python -m tasksieve.pipeline.commands.validate",
        description="Check task files against the TaskRecord schema, one line per problem.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
