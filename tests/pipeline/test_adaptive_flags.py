"""``--adaptive`` and its knobs become the run's AdaptiveConfig (or are refused)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tasksieve.pipeline.commands.curate import curate_config
from tasksieve.pipeline.curate import beam_main
from tasksieve.pipeline.curate.config import CurateConfig
from tasksieve.transforms.algorithms.adaptive_stopping import AdaptiveConfig
from tasksieve.transforms.rollouts.episode_state import EpisodeConfig
from tasksieve.transforms.samplers import SamplerConfig

ROOT = Path(__file__).resolve().parents[2]
BASE = [
    f"--input={ROOT / 'examples' / 'tasks' / 'code.jsonl'}",
    "--output=out",
    "--sampler=replay",
    f"--replay={ROOT / 'examples' / 'replay' / 'completions.jsonl'}",
]


def config(*flags: str) -> CurateConfig:
    args, beam_args = beam_main.parse([*BASE, *flags])
    return curate_config(args, beam_args)


def test_without_the_flag_the_run_samples_a_fixed_k() -> None:
    assert config("--samples=8").adaptive is None


def test_samples_is_the_maximum() -> None:
    cfg = config("--samples=16", "--adaptive")
    assert cfg.adaptive == AdaptiveConfig(16, first_round=4, round_size=4, confidence=0.95)


def test_the_knobs_reach_the_config() -> None:
    cfg = config(
        "--samples=12",
        "--adaptive",
        "--adaptive-round=2",
        "--adaptive-first-round=6",
        "--adaptive-confidence=0.9",
        "--adaptive-streak=8",
    )
    assert cfg.adaptive == AdaptiveConfig(12, 6, 2, 0.9, 8)


def test_a_first_round_larger_than_the_budget_is_the_budget() -> None:
    adaptive = config("--samples=2", "--adaptive").adaptive
    assert adaptive is not None and (adaptive.first_round, adaptive.max_samples) == (2, 2)


@pytest.mark.parametrize(
    "knob",
    [
        "--adaptive-round=2",
        "--adaptive-first-round=2",
        "--adaptive-confidence=0.9",
        "--adaptive-streak=8",
    ],
)
def test_a_knob_without_adaptive_is_refused(knob: str) -> None:
    with pytest.raises(ValueError, match="only work with --adaptive"):
        config(knob)


@pytest.mark.parametrize("confidence", ["1", "0", "1.5", "-0.1"])
def test_a_confidence_outside_0_1_is_refused(confidence: str) -> None:
    with pytest.raises(ValueError, match="confidence must be in"):
        config("--adaptive", f"--adaptive-confidence={confidence}")


def test_the_maximum_must_be_the_sampler_samples() -> None:
    with pytest.raises(ValueError, match="--samples is the maximum"):
        CurateConfig(
            inputs=("x",),
            output="o",
            sampler=SamplerConfig(samples=8),
            adaptive=AdaptiveConfig(16),
        )


def test_adaptive_runs_have_their_own_fingerprint() -> None:
    fixed = CurateConfig(inputs=("x",), output="o", sampler=SamplerConfig(samples=16))
    adaptive = CurateConfig(
        inputs=("x",), output="o", sampler=SamplerConfig(samples=16), adaptive=AdaptiveConfig(16)
    )
    assert fixed.fingerprint() != adaptive.fingerprint()


ADAPTIVE = AdaptiveConfig(16)


def test_adaptive_with_several_turns_is_refused() -> None:
    with pytest.raises(ValueError, match="--turns 3 cannot be combined with --adaptive"):
        CurateConfig(
            inputs=("x",),
            output="o",
            sampler=SamplerConfig(samples=16),
            episodes=EpisodeConfig(turns=3),
            adaptive=ADAPTIVE,
        )


def test_adaptive_with_one_turn_is_fine() -> None:
    cfg = CurateConfig(
        inputs=("x",),
        output="o",
        sampler=SamplerConfig(samples=16),
        episodes=EpisodeConfig(turns=1),
        adaptive=ADAPTIVE,
    )
    assert cfg.adaptive is not None
