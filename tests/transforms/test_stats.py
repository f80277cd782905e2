"""Wilson interval and the difficulty band."""

from __future__ import annotations

import pytest

from tasksieve.transforms.algorithms.stats import BandConfig, histogram_bin, wilson_interval


def test_wilson_matches_known_value() -> None:
    lo, hi = wilson_interval(5, 10)
    assert lo == pytest.approx(0.2366, abs=1e-3)
    assert hi == pytest.approx(0.7634, abs=1e-3)


@pytest.mark.parametrize("k,n", [(0, 4), (4, 4), (1, 3), (0, 1)])
def test_wilson_bounds_contain_point_estimate(k: int, n: int) -> None:
    lo, hi = wilson_interval(k, n)
    assert 0.0 <= lo <= k / n <= hi <= 1.0


def test_wilson_rejects_impossible_counts() -> None:
    with pytest.raises(ValueError, match="0 <= k <= n"):
        wilson_interval(5, 4)


@pytest.mark.parametrize(
    "rate,expected", [(0.0, "too_hard"), (0.25, "keep"), (0.99, "keep"), (1.0, "too_easy")]
)
def test_default_band(rate: float, expected: str) -> None:
    assert BandConfig().classify(rate) == expected


@pytest.mark.parametrize("hard,easy", [(0.9, 0.2), (0.5, 0.5), (-0.1, 0.5), (0.1, 1.5)])
def test_band_rejects_bad_bounds(hard: float, easy: float) -> None:
    with pytest.raises(ValueError, match="need 0 <= too_hard < too_easy <= 1"):
        BandConfig(too_hard=hard, too_easy=easy)


@pytest.mark.parametrize(
    "rate,label", [(0.0, "0"), (1.0, "1"), (0.5, "(0.4,0.6]"), (0.2, "(0.0,0.2]")]
)
def test_histogram_bins(rate: float, label: str) -> None:
    assert histogram_bin(rate) == label
