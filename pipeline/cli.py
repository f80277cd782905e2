"""The ``tasksieve`` command line: build the parser, then import and run one subcommand.

Building the parser imports nothing heavy: every command module keeps its top level to the
standard library (flag definitions only) and imports Beam, the samplers, the verifiers or
pyarrow inside the function that runs the command. So ``tasksieve validate`` and
``tasksieve verify`` never load Beam, torch or transformers; ``tests/pipeline/test_cli_startup.py``
guards that by listing ``sys.modules`` after a real run. This does not make the heavy
commands (``curate``, ``decontaminate``, ``benchmarks``) start faster: they need Beam.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Callable, Sequence

# Beam logs a warning about optional GCP clients at import time; keep the CLI's output clean.
logging.getLogger().setLevel(logging.ERROR)

from tasksieve.pipeline.commands import check as check_cmd  # noqa: E402
from tasksieve.pipeline.commands import completion as completion_cmd  # noqa: E402
from tasksieve.pipeline.commands import decontaminate as decontam_cmd  # noqa: E402
from tasksieve.pipeline.commands import indexes as contamination_cmd  # noqa: E402
from tasksieve.pipeline.commands import query as query_cmd  # noqa: E402
from tasksieve.pipeline.commands import repo_io as repo_io_cmd  # noqa: E402
from tasksieve.pipeline.commands import report as report_cmd  # noqa: E402
from tasksieve.pipeline.commands import sandbox as sandbox_cmd  # noqa: E402
from tasksieve.pipeline.commands import serve as serve_cmd  # noqa: E402
from tasksieve.pipeline.commands import synth as synth_cmd  # noqa: E402
from tasksieve.pipeline.commands import validate as validate_cmd  # noqa: E402
from tasksieve.pipeline.commands import verify as verify_cmd  # noqa: E402
from tasksieve.pipeline.flags import curate as curate_args  # noqa: E402
from tasksieve.pipeline.train import cli as train_cli  # noqa: E402

# Subcommand -> "module:function" imported only when that subcommand runs.
RUNNERS: dict[str, str] = {
    "validate": "tasksieve.pipeline.commands.validate:run",
    "verify": "tasksieve.pipeline.commands.verify_run:run",
    "decontaminate": "tasksieve.pipeline.commands.decontaminate:run",
    "benchmarks": "tasksieve.pipeline.commands.indexes:run",
    "dedup-index": "tasksieve.pipeline.commands.indexes:run",
    "sandbox": "tasksieve.pipeline.commands.sandbox:run",
    "query": "tasksieve.pipeline.commands.query:run",
    "report": "tasksieve.pipeline.commands.report:run",
    "check": "tasksieve.pipeline.commands.check:run",
    "train": "tasksieve.pipeline.train.cli:run",
    "serve": "tasksieve.pipeline.commands.serve:run",
    "synth": "tasksieve.pipeline.commands.synth:run",
    "import": "tasksieve.pipeline.commands.repo_io:run_import",
    "export": "tasksieve.pipeline.commands.repo_io:run_export",
}


def package_version() -> str:
    """The installed tasksieve version, from the package metadata."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("tasksieve")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "unknown (not installed)"


class _VersionAction(argparse.Action):
    """``--version``: print the version and exit, reading package metadata only when asked."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *_args: object) -> None:
        print(f"{parser.prog} {package_version()}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    """The full ``tasksieve`` parser (cheap: no command implementation is imported)."""
    parser = argparse.ArgumentParser(
        prog="tasksieve", description="Curate verified RL tasks for language models."
    )
    parser.add_argument("--version", action=_VersionAction)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    curate_args.add_parser(sub)
    validate_cmd.add_parser(sub)
    verify_cmd.add_parser(sub)
    decontam_cmd.add_parser(sub)
    contamination_cmd.add_parser(sub)
    sandbox_cmd.add_parser(sub)
    query_cmd.add_parser(sub)
    report_cmd.add_parser(sub)
    check_cmd.add_parser(sub)
    train_cli.add_parser(sub)
    serve_cmd.add_parser(sub)
    synth_cmd.add_parser(sub)
    repo_io_cmd.add_parser(sub)
    completion_cmd.add_parser(sub)
    return parser


def _runner(command: str) -> Callable[[argparse.Namespace], int]:
    module, _, func = RUNNERS[command].partition(":")
    run: Callable[[argparse.Namespace], int] = getattr(importlib.import_module(module), func)
    return run


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown and args.command != "curate":
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    if args.command == "curate":
        bad = [a for a in unknown if not a.startswith("--")]
        if bad:
            parser.error(f"unrecognized arguments: {' '.join(bad)}")
        from tasksieve.pipeline.commands.curate import run_curate

        return run_curate(args, unknown)
    if args.command == "completion":
        return completion_cmd.run(args, parser)
    return _runner(args.command)(args)


if __name__ == "__main__":
    sys.exit(main())
