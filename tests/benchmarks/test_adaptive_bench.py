"""The adaptive-sampling benchmark: a quick run; edges 0 and 1 without a streak never differ."""

from __future__ import annotations

import random

import pytest

from benchmarks import adaptive_sampling as bench
from transforms.adaptive import AdaptiveConfig
from transforms.stats import BandConfig


@pytest.mark.parametrize("seed", [3, 4])
def test_default_band_without_a_streak_labels_as_fixed_k(seed: int) -> None:
    """A pass and a failure settle "keep" for good; anything else runs to 16."""
    ps = bench.synthetic(500, random.Random(seed))
    cfg = AdaptiveConfig(max_samples=16)
    row = bench.compare("s", ps, BandConfig(), cfg, random.Random(seed + 1))
    assert row.differ == 0.0 and 0 < row.per_task < 16


def test_quick_run_prints_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main(["--tasks", "200", "--no-replay"]) == 0
    out = capsys.readouterr().out
    assert "| synthetic (200) | (0, 1) | none |" in out and "goal" in out
