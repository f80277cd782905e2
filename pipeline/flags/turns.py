"""The ``curate`` flags of multi-turn episodes and their config.

Standard library only at the top (the parser is built before any command runs).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from tasksieve.pipeline.flags.shared import positive_int

if TYPE_CHECKING:
    from tasksieve.transforms.rollouts.episode_state import EpisodeConfig

LEVELS = ("none", "summary", "failing")
"""Feedback levels (``tasksieve.verifiers.feedback.LEVELS``; a test checks that the two agree)."""


def add_episode_flags(p: argparse.ArgumentParser) -> None:
    """``--turns``, ``--band-turn`` and ``--feedback``."""
    g = p.add_argument_group("multi-turn episodes (execute, feed the verdict back, retry)")
    g.add_argument(
        "--turns",
        type=positive_int,
        default=1,
        help="attempts per episode: after a failed one the verdict is fed back and the model "
        "tries again, up to this many turns or a pass (default 1: one-shot samples)",
    )
    g.add_argument(
        "--band-turn",
        type=positive_int,
        default=None,
        metavar="T",
        help="the turn whose pass rate (episodes passed by then) decides the band "
        "(default: the last turn)",
    )
    g.add_argument(
        "--feedback",
        choices=LEVELS,
        default=None,
        help="how much of the tests feedback may reveal: none (kind of failure only), summary "
        "(checks passed, error types), failing (failing checks and error messages); "
        "overrides each task's own 'feedback' field (default: the task's, else summary)",
    )


def episode_config(args: argparse.Namespace) -> EpisodeConfig:
    """The ``EpisodeConfig`` from the parsed flags."""
    from tasksieve.transforms.rollouts.episode_state import EpisodeConfig

    return EpisodeConfig(turns=args.turns, band_turn=args.band_turn, feedback=args.feedback)
