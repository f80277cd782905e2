"""Which task each training prompt comes from: uniform, or weighted by measured pass rate.

GRPO learns only from groups whose rewards differ: a task every sample passes (p = 1) or
fails (p = 0) gives all-equal rewards, zero advantages and no gradient. The ``band``
curriculum therefore draws tasks with weight ``max(floor, 4 p (1 - p))`` (the variance of a
pass/fail reward, scaled to 1 at p = 0.5), so tasks in the middle of the band come up most
often and none drops out. ``p`` is the pass rate measured at curation time, by the curation
sampler's model: a different or further-trained policy has different rates, which this does
NOT track (the weights are fixed for the run).
"""

from __future__ import annotations

import random
from collections.abc import Sequence


def band_weight(pass_rate: float, floor: float) -> float:
    """``max(floor, 4 p (1 - p))``: 1 at p = 0.5, ``floor`` at p = 0 or 1."""
    p = min(1.0, max(0.0, pass_rate))
    return max(floor, 4.0 * p * (1.0 - p))


def schedule(
    pass_rates: Sequence[float], n: int, curriculum: str, seed: int, floor: float = 0.05
) -> list[int]:
    """``n`` task indices in training order.

    ``none``: every task once per pass, each pass shuffled; ``band``: drawn independently
    with ``band_weight`` (with replacement, reproducible from ``seed``).
    """
    if not pass_rates:
        raise ValueError("no tasks to schedule")
    if n < 1:
        raise ValueError(f"need at least one prompt, got {n}")
    rng = random.Random(seed)
    if curriculum == "none":
        order: list[int] = []
        while len(order) < n:
            one_pass = list(range(len(pass_rates)))
            rng.shuffle(one_pass)
            order.extend(one_pass)
        return order[:n]
    if curriculum == "band":
        if not 0.0 <= floor <= 1.0:
            raise ValueError(f"curriculum floor must be in [0, 1], got {floor}")
        weights = [band_weight(p, floor) for p in pass_rates]
        if sum(weights) <= 0:
            raise ValueError("every task has weight 0: raise --curriculum-floor above 0")
        return rng.choices(range(len(pass_rates)), weights=weights, k=n)
    raise ValueError(f"unknown curriculum {curriculum!r} (choose none or band)")
