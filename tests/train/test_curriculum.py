"""The curriculum: uniform passes, or draws weighted towards the middle of the pass-rate band."""

from __future__ import annotations

from collections import Counter

import pytest

from tasksieve.pipeline.train.curriculum import band_weight, schedule


@pytest.mark.parametrize(
    ("p", "floor", "weight"),
    [(0.5, 0.05, 1.0), (0.0, 0.05, 0.05), (1.0, 0.05, 0.05), (0.25, 0.0, 0.75), (0.9, 0.5, 0.5)],
)
def test_band_weight(p: float, floor: float, weight: float) -> None:
    assert band_weight(p, floor) == pytest.approx(weight)


def test_none_visits_every_task_once_per_pass() -> None:
    order = schedule([0.1, 0.5, 0.9], 9, "none", seed=3)
    for k in range(3):
        assert sorted(order[3 * k : 3 * k + 3]) == [0, 1, 2]


def test_band_favours_the_middle() -> None:
    counts = Counter(schedule([0.02, 0.5, 0.98], 3000, "band", seed=0))
    assert counts[1] > 5 * counts[0] and counts[1] > 5 * counts[2]
    assert counts[0] > 0 and counts[2] > 0  # the floor keeps every task in play


def test_same_seed_same_schedule() -> None:
    rates = [0.3, 0.5, 0.7, 0.1]
    assert schedule(rates, 50, "band", seed=7) == schedule(rates, 50, "band", seed=7)
    assert schedule(rates, 50, "band", seed=7) != schedule(rates, 50, "band", seed=8)


@pytest.mark.parametrize(
    ("rates", "n", "curriculum", "floor"),
    [
        ([], 5, "none", 0.05),
        ([0.5], 0, "none", 0.05),
        ([0.5], 3, "hard-first", 0.05),
        ([0.0, 1.0], 3, "band", 0.0),
        ([0.5], 3, "band", 1.5),
    ],
)
def test_bad_schedule_is_refused(rates: list[float], n: int, curriculum: str, floor: float) -> None:
    with pytest.raises(ValueError):
        schedule(rates, n, curriculum, seed=0, floor=floor)
