"""Which task each training prompt comes from: uniform, or weighted by measured pass rate.

GRPO learns only from groups whose rewards differ: a task every sample passes (p = 1) or
fails (p = 0) gives all-equal rewards, zero advantages and no gradient. The ``band``
curriculum therefore draws tasks with weight ``max(floor, 4 p (1 - p))`` (the variance of a
pass/fail reward, scaled to 1 at p = 0.5), so tasks in the middle of the band come up most
often and none drops out. ``p`` is the pass rate measured at curation time, by the curation
sampler's model: a different or further-trained policy has different rates, which this does
NOT track (the weights are fixed for the run).

``--family-weights`` multiplies each task's weight by its family's, to balance families in
the mix (multi-task RL can let a family with many tasks or an easy reward crowd the others
out); with it, ``none`` draws too, each task with its family's weight.
"""

from __future__ import annotations

import random
from collections.abc import Sequence


def band_weight(pass_rate: float, floor: float) -> float:
    """``max(floor, 4 p (1 - p))``: 1 at p = 0.5, ``floor`` at p = 0 or 1."""
    p = min(1.0, max(0.0, pass_rate))
    return max(floor, 4.0 * p * (1.0 - p))


def parse_family_weights(text: str, families: Sequence[str]) -> dict[str, float]:
    """``code=2,sql=1`` as a mapping; families left out weigh 1. ValueError names the problem."""
    out: dict[str, float] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        name, sep, value = part.partition("=")
        if not sep or name not in families:
            raise ValueError(
                f"--family-weights: {part!r} is not FAMILY=WEIGHT with a family of "
                f"{', '.join(families)}"
            )
        try:
            weight = float(value)
        except ValueError:
            raise ValueError(f"--family-weights: {value!r} for {name} is not a number") from None
        if not weight >= 0 or weight == float("inf"):
            raise ValueError(f"--family-weights: {name} needs a finite weight >= 0, got {value}")
        out[name] = weight
    return out


def schedule(
    pass_rates: Sequence[float],
    n: int,
    curriculum: str,
    seed: int,
    floor: float = 0.05,
    family_weights: Sequence[float] | None = None,
) -> list[int]:
    """``n`` task indices in training order.

    ``none``: every task once per pass, each pass shuffled; ``band``: drawn independently
    with ``band_weight`` (with replacement, reproducible from ``seed``). ``family_weights``
    (one per task: its family's weight) multiplies the weights, and makes ``none`` draw.
    """
    if not pass_rates:
        raise ValueError("no tasks to schedule")
    if n < 1:
        raise ValueError(f"need at least one prompt, got {n}")
    rng = random.Random(seed)
    if family_weights is not None:
        if curriculum == "band" and not 0.0 <= floor <= 1.0:
            raise ValueError(f"curriculum floor must be in [0, 1], got {floor}")
        if curriculum not in ("none", "band"):
            raise ValueError(f"unknown curriculum {curriculum!r} (choose none or band)")
        base = [band_weight(p, floor) if curriculum == "band" else 1.0 for p in pass_rates]
        weights = [b * f for b, f in zip(base, family_weights, strict=True)]
        if sum(weights) <= 0:
            raise ValueError("--family-weights gives every task weight 0")
        return rng.choices(range(len(pass_rates)), weights=weights, k=n)
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
