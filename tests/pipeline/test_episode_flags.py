"""The curate flags of multi-turn episodes: parsing, defaults and the config they make."""

from __future__ import annotations

import argparse

import pytest

from tasksieve.pipeline.flags.turns import LEVELS, add_episode_flags, episode_config
from tasksieve.transforms.rollouts.episode_state import EpisodeConfig
from tasksieve.verifiers.feedback import LEVELS as FEEDBACK_LEVELS


def _parse(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_episode_flags(p)
    return p.parse_args(list(argv))


def test_the_flag_levels_are_the_feedback_levels() -> None:
    assert LEVELS == FEEDBACK_LEVELS


def test_no_flag_gives_the_one_turn_default() -> None:
    assert episode_config(_parse()) == EpisodeConfig()


def test_the_flags_make_the_config() -> None:
    cfg = episode_config(_parse("--turns", "3", "--band-turn", "2", "--feedback", "none"))
    assert cfg == EpisodeConfig(turns=3, band_turn=2, feedback="none")


def test_a_band_turn_past_the_last_turn_fails_with_the_flag_named() -> None:
    with pytest.raises(ValueError, match="--band-turn"):
        episode_config(_parse("--turns", "2", "--band-turn", "3"))


@pytest.mark.parametrize("argv", [["--turns", "0"], ["--turns", "x"], ["--feedback", "all"]])
def test_bad_values_are_usage_errors(argv: list[str]) -> None:
    with pytest.raises(SystemExit):
        _parse(*argv)
