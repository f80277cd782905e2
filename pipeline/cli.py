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

from pipeline import (  # noqa: E402
    check_cmd,
    completion_cmd,
    contamination_cmd,
    curate_args,
    decontam_cmd,
    query_cmd,
    report_cmd,
    sandbox_cmd,
    serve_cmd,
    verify_cmd,
)
from pipeline import validate as validate_cmd  # noqa: E402
from pipeline.train import cli as train_cli  # noqa: E402

# Subcommand -> "module:function" imported only when that subcommand runs.
RUNNERS: dict[str, str] = {
    "validate": "pipeline.validate:run",
    "verify": "pipeline.verify_cmd:run",
    "decontaminate": "pipeline.decontam_cmd:run",
    "benchmarks": "pipeline.contamination_cmd:run",
    "dedup-index": "pipeline.contamination_cmd:run",
    "sandbox": "pipeline.sandbox_cmd:run",
    "query": "pipeline.query_cmd:run",
    "report": "pipeline.report_cmd:run",
    "check": "pipeline.check_cmd:run",
    "train": "pipeline.train.cli:run",
    "serve": "pipeline.serve_cmd:run",
}


# Names that lived here before the curate command moved out, for code that imports them.
_MOVED = {
    "curate_config": ("pipeline.curate_cmd", "curate_config"),
    "check_sampler_args": ("pipeline.curate_cmd", "check_sampler_args"),
    "check_beam_args": ("pipeline.curate_cmd", "check_beam_args"),
    "run_curate": ("pipeline.curate_cmd", "run_curate"),
    "add_curate_parser": ("pipeline.curate_args", "add_parser"),
    "EPILOG": ("pipeline.curate_args", "EPILOG"),
}


def __getattr__(name: str) -> object:
    """Old names, imported on first use (importing them eagerly would load Beam)."""
    if name in _MOVED:
        module, attr = _MOVED[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
        from pipeline.curate_cmd import run_curate

        return run_curate(args, unknown)
    if args.command == "completion":
        return completion_cmd.run(args, parser)
    return _runner(args.command)(args)


if __name__ == "__main__":
    sys.exit(main())
