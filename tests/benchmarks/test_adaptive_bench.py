"""The adaptive-sampling benchmark: a quick run; yardsticks on populations with known results."""

from __future__ import annotations

import random

import pytest

from benchmarks import adaptive_sampling as bench
from tasksieve.transforms.algorithms.stats import BandConfig

NONE = bench.Rule("none", 4, 4, None)


@pytest.mark.parametrize("seed", [3, 4])
def test_default_band_without_a_streak_labels_as_fixed_k(seed: int) -> None:
    """A pass and a failure settle "keep" for good; anything else runs to 16."""
    ps = bench.synthetic(500, random.Random(seed))
    row = bench.compare("s", ps, BandConfig(), NONE, random.Random(seed + 1))
    assert row.differ == 0.0 and 0 < row.per_task < 16


def test_a_rerun_of_certain_tasks_never_differs() -> None:
    row = bench.rerun("s", [0.0, 1.0] * 50, BandConfig(), random.Random(0))
    assert (row.differ, row.wrong) == (0.0, 0.0)


def test_the_stop_point_bound_stops_hopeless_tasks_at_once() -> None:
    """Tasks that never pass: stopping after one failure loses no label."""
    line = bench.stop_point_bound([0.0] * 100, random.Random(0))
    assert "stop after 1 failures" in line and "93.8% saved, 0.00% differing" in line


def test_quick_run_prints_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main(["--tasks", "200", "--no-replay"]) == 0
    out = capsys.readouterr().out
    assert "| synthetic (200) | (0, 1) | none |" in out and "goal" in out
    assert "fixed K=16, rerun" in out and "best stop points" in out
