"""Pass-rate statistics: the Wilson score interval and the difficulty band."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Literal

Difficulty = Literal["too_easy", "keep", "too_hard"]


def wilson_interval(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval for k successes out of n trials (0, 1 when n == 0)."""
    if n < 0 or k < 0 or k > n:
        raise ValueError(f"need 0 <= k <= n, got k={k}, n={n}")
    if n == 0:
        return 0.0, 1.0
    p = k / n
    z2 = z * z
    denom = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class BandConfig:
    """Which pass rates are kept: ``too_hard < pass_rate < too_easy`` is ``keep``.

    A task at or below ``too_hard`` teaches nothing (no sample earns a reward); one at or
    above ``too_easy`` neither (every sample does). The defaults keep any mixed outcome.
    """

    too_hard: float = 0.0
    too_easy: float = 1.0

    def __post_init__(self) -> None:
        if not (0.0 <= self.too_hard < self.too_easy <= 1.0):
            raise ValueError(
                f"need 0 <= too_hard < too_easy <= 1, got {self.too_hard}, {self.too_easy}"
            )

    def classify(self, pass_rate: float) -> Difficulty:
        if pass_rate <= self.too_hard:
            return "too_hard"
        if pass_rate >= self.too_easy:
            return "too_easy"
        return "keep"


HISTOGRAM_EDGES = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)


def histogram_bin(pass_rate: float) -> str:
    """Label of the pass-rate bin: exact 0 and 1 get their own bins."""
    if pass_rate <= 0.0:
        return "0"
    if pass_rate >= 1.0:
        return "1"
    for lo, hi in itertools.pairwise(HISTOGRAM_EDGES):
        if pass_rate <= hi:
            return f"({lo:.1f},{hi:.1f}]"
    return "1"
