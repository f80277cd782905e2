"""The ``curate`` flags of the test-strength and ambiguity detectors, and their configs.

Standard library only at the top (the parser is built before any command runs). Flags left
unset keep the config dataclasses' defaults (``verifiers.reliability``), which the help text
states; ``tests/pipeline/test_reliability_flags.py`` checks that the two agree.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tasksieve.verifiers.reliability import AmbiguityConfig, StrengthConfig

DEFAULTS: dict[str, Any] = {
    "min_score": 0.8,
    "max_mutants": 16,
    "probes": 24,
    "threshold": 0.1,
}
"""The defaults the help text states (must equal the dataclasses' own defaults)."""


def add_reliability_flags(p: argparse.ArgumentParser) -> None:
    """``--min-mutation-score``, ``--max-mutants``, ``--probes``, ``--ambiguity-threshold``,
    ``--no-weak-tests`` and ``--no-ambiguity``."""
    d = DEFAULTS
    p.add_argument(
        "--min-mutation-score",
        type=float,
        default=None,
        help="reject tasks whose tests kill fewer than this share of the reference's "
        f"non-equivalent mutants, as gate.weak_tests (default {d['min_score']})",
    )
    p.add_argument(
        "--max-mutants",
        type=int,
        default=None,
        help=f"mutants of the reference judged per task (default {d['max_mutants']})",
    )
    p.add_argument(
        "--probes",
        type=int,
        default=None,
        help="extra inputs per task for telling surviving mutants from equivalent ones and "
        f"for the ambiguity check (default {d['probes']})",
    )
    p.add_argument(
        "--ambiguity-threshold",
        type=float,
        default=None,
        help="for families without a contract model: reject as filter.ambiguous when passing "
        "samples disagree with the reference on more than this share of the valid extra inputs "
        f"(default {d['threshold']}); for code tasks one disagreement on an input inside the "
        "task's contract is enough",
    )
    p.add_argument(
        "--no-weak-tests", action="store_true", help="skip the test-strength (mutation) check"
    )
    p.add_argument("--no-ambiguity", action="store_true", help="skip the ambiguity check")


def _given(**values: Any) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def strength_config(args: argparse.Namespace, workers: int) -> StrengthConfig:
    """StrengthConfig from the flags (``workers``: mutants judged at once)."""
    from tasksieve.verifiers.reliability import StrengthConfig

    return StrengthConfig(
        enabled=not args.no_weak_tests,
        workers=workers,
        seed=args.seed,
        **_given(
            min_score=args.min_mutation_score, max_mutants=args.max_mutants, probes=args.probes
        ),
    )


def ambiguity_config(args: argparse.Namespace) -> AmbiguityConfig:
    """AmbiguityConfig from the flags."""
    from tasksieve.verifiers.reliability import AmbiguityConfig

    return AmbiguityConfig(
        enabled=not args.no_ambiguity,
        seed=args.seed,
        **_given(threshold=args.ambiguity_threshold, probes=args.probes),
    )
