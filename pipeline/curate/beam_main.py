"""Entry module for launchers that run the curate job as a Beam Python file.

``python -m pipeline.curate.beam_main --input DIR --output DIR [curate flags] [Beam options]`` runs
exactly what ``tasksieve curate`` runs, with the same flags and exit status. It exists for
launchers that start a Beam pipeline as "a Python file plus pipeline options as flags" (the
Airflow Apache Beam provider, ``gcloud``/Flink/Spark job submitters). Such launchers:

- spell every option ``--snake_case=value`` (the provider snake-cases the keys of its
  ``pipeline_options``), so a curate flag may be given as ``--max_new_tokens=64`` as well as
  ``--max-new-tokens 64``;
- repeat a list-valued option once per item (``--input=a --input=b``), which curate collects;
- append options of their own (``--runner=...``, ``--labels=key=value``, ``--job_name=...``):
  ``--runner`` is curate's own flag, the others are Beam pipeline options and go to Beam.

An option that is neither a curate flag nor a Beam pipeline option is refused (exit 2), as
``tasksieve curate`` refuses it. This module does NOT rename Beam's own options: only a name
whose dashed spelling is a curate flag is rewritten (a test checks no such name is also a
Beam option other than ``--runner``, which means the same thing to both).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from tasksieve.pipeline.flags import curate as curate_args


def curate_parser() -> argparse.ArgumentParser:
    """The ``tasksieve curate`` parser itself, built the way the CLI builds it."""
    root = argparse.ArgumentParser(prog="tasksieve")
    sub = root.add_subparsers(dest="command")
    curate_args.add_parser(sub)
    parser: argparse.ArgumentParser = sub.choices["curate"]
    parser.prog = "python -m tasksieve.pipeline.curate.beam_main"
    return parser


def curate_flags(parser: argparse.ArgumentParser) -> frozenset[str]:
    """The long option strings of ``parser`` (``--max-new-tokens``, ...)."""
    return frozenset(
        o for action in parser._actions for o in action.option_strings if o.startswith("--")
    )


def normalise(argv: Sequence[str], flags: frozenset[str]) -> list[str]:
    """Rewrite ``--snake_case`` spellings of curate flags to their dashed names.

    Values, Beam options and anything else pass through unchanged.
    """
    out: list[str] = []
    for arg in argv:
        name, eq, value = arg.partition("=")
        if name.startswith("--") and "_" in name:
            dashed = "--" + name[2:].replace("_", "-")
            if dashed in flags:
                arg = dashed + eq + value
        out.append(arg)
    return out


def parse(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    """Curate's flags and the remaining (Beam) options; exits 2 on a malformed command line."""
    parser = curate_parser()
    args, beam_args = parser.parse_known_args(normalise(argv, curate_flags(parser)))
    stray = [a for a in beam_args if not a.startswith("--")]
    if stray:
        parser.error(f"unrecognized arguments: {' '.join(stray)}")
    return args, beam_args


def main(argv: Sequence[str] | None = None) -> int:
    """Run the curate job; 0 published, 2 usage or input error, 3 internal error."""
    args, beam_args = parse(sys.argv[1:] if argv is None else argv)
    from tasksieve.pipeline.commands.curate import run_curate

    return run_curate(args, beam_args)


if __name__ == "__main__":
    sys.exit(main())
