"""The curate flags of adaptive sampling (``--adaptive``; ``--samples`` is the maximum).

Standard library only (the parser is built before any command runs); ``adaptive_config``
turns the parsed flags into ``transforms.algorithms.adaptive_stopping.AdaptiveConfig`` or None.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from tasksieve.pipeline.flags.shared import positive_int

if TYPE_CHECKING:
    from tasksieve.transforms.algorithms.adaptive_stopping import AdaptiveConfig

KNOBS = ("adaptive_round", "adaptive_first_round", "adaptive_confidence", "adaptive_streak")


def add_adaptive_flags(p: argparse.ArgumentParser) -> None:
    """``--adaptive`` and its knobs."""
    g = p.add_argument_group("adaptive sampling (--adaptive; --samples is the maximum)")
    g.add_argument(
        "--adaptive",
        action="store_true",
        help="sample in rounds and stop a task once its band label is settled",
    )
    g.add_argument(
        "--adaptive-round",
        type=positive_int,
        metavar="N",
        help="samples per round after the first (default 4)",
    )
    g.add_argument(
        "--adaptive-first-round",
        type=positive_int,
        metavar="N",
        help="samples in the first round (default: the round size)",
    )
    g.add_argument(
        "--adaptive-confidence",
        type=float,
        metavar="C",
        help="confidence of the interval that settles a band edge inside (0, 1) (default 0.95)",
    )
    g.add_argument(
        "--adaptive-streak",
        type=positive_int,
        metavar="S",
        help="settle an unbroken run of S failures (passes) as too_hard (too_easy): a bet "
        "that changes some labels (see docs/benchmarks/adaptive.md); default: never",
    )


def adaptive_config(args: argparse.Namespace) -> AdaptiveConfig | None:
    """The run's AdaptiveConfig, or None without ``--adaptive`` (its knobs alone are refused)."""
    given = [k for k in KNOBS if getattr(args, k, None) is not None]
    if not args.adaptive:
        if given:
            flags = ", ".join("--" + k.replace("_", "-") for k in given)
            raise ValueError(f"{flags} only work with --adaptive")
        return None
    from tasksieve.transforms.algorithms.adaptive_stopping import AdaptiveConfig

    size = args.adaptive_round or 4
    first = args.adaptive_first_round or size
    return AdaptiveConfig(
        max_samples=args.samples,
        first_round=min(first, args.samples),
        round_size=size,
        confidence=0.95 if args.adaptive_confidence is None else args.adaptive_confidence,
        streak=args.adaptive_streak,
    )
