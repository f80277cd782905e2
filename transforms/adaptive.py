"""Adaptive sampling: draw a task's samples in rounds and stop once its band label is settled.

A task's label comes from its pass rate and ``BandConfig`` (``too_hard < rate < too_easy`` is
``keep``). After each round, ``settled_label`` says whether more samples could still change
the label at the chosen confidence:

- an edge strictly inside (0, 1) is decided by the Wilson interval (``transforms.stats``):
  an interval wholly at or below ``too_hard`` is ``too_hard``, wholly at or above
  ``too_easy`` is ``too_easy``, wholly between them is ``keep``;
- an edge at 0 (the default ``too_hard``) is crossed by the first pass, an edge at 1 (the
  default ``too_easy``) by the first failure: with the default band a task is ``keep`` as
  soon as it has one of each, which no further sample can undo;
- an unbroken run of failures (or of passes) can never prove a pass rate of exactly 0 (or 1).
  ``streak``, when set, settles such a task after that many samples: a bet that the rest of
  the budget would not break the run. Its cost, in labels that differ from a fixed-K run, is
  measured by ``benchmarks/adaptive_sampling.py``; unset (the default), such tasks are
  sampled up to the maximum and get the same label as a fixed-K run on the same samples.

A task that reaches ``max_samples`` is labelled from its pass rate, as a fixed-K run would.
What it does NOT do: use other tasks' outcomes (no prior across tasks), or reorder samples.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from statistics import NormalDist

from transforms.stats import BandConfig, Difficulty, wilson_interval


@dataclass(frozen=True)
class AdaptiveConfig:
    """Rounds, their sizes and the confidence at which a label counts as settled."""

    max_samples: int = 16
    first_round: int = 4
    round_size: int = 4
    confidence: float = 0.95
    streak: int | None = None

    def __post_init__(self) -> None:
        if self.max_samples < 1:
            raise ValueError(f"max_samples must be >= 1, got {self.max_samples}")
        if not 1 <= self.first_round <= self.max_samples:
            raise ValueError(
                f"first_round must be in 1..max_samples ({self.max_samples}), "
                f"got {self.first_round}"
            )
        if self.round_size < 1:
            raise ValueError(f"round_size must be >= 1, got {self.round_size}")
        if not 0 < self.confidence < 1:
            raise ValueError(f"confidence must be in (0, 1), e.g. 0.95; got {self.confidence}")
        if self.streak is not None and self.streak < 1:
            raise ValueError(f"streak must be >= 1 or None (never), got {self.streak}")

    @property
    def z(self) -> float:
        """The two-sided normal quantile of ``confidence`` (1.96 for 0.95)."""
        return NormalDist().inv_cdf(0.5 + self.confidence / 2)


def settled_label(k: int, n: int, band: BandConfig, cfg: AdaptiveConfig) -> Difficulty | None:
    """The label of a task with ``k`` passes in ``n`` samples if settled, else None."""
    if n >= cfg.max_samples:
        return band.classify(k / n)
    if n == 0:
        return None
    low, high = wilson_interval(k, n, cfg.z)
    above_hard = k > 0 if band.too_hard == 0 else low > band.too_hard
    below_easy = k < n if band.too_easy == 1 else high < band.too_easy
    if above_hard and below_easy:
        return "keep"
    if band.too_hard > 0 and high <= band.too_hard:
        return "too_hard"
    if band.too_easy < 1 and low >= band.too_easy:
        return "too_easy"
    if cfg.streak is not None and n >= cfg.streak:
        if k == 0:
            return "too_hard"
        if k == n:
            return "too_easy"
    return None


def next_round(n: int, cfg: AdaptiveConfig) -> int:
    """How many samples the next round draws after ``n`` (never past ``max_samples``)."""
    size = cfg.first_round if n == 0 else cfg.round_size
    return max(0, min(size, cfg.max_samples - n))


@dataclass(frozen=True)
class Outcome:
    """One task's adaptive run: passes, samples drawn, rounds and the label."""

    k: int
    n: int
    rounds: int
    label: Difficulty


def sample_adaptively(
    draw: Callable[[int, int], list[bool]], band: BandConfig, cfg: AdaptiveConfig
) -> Outcome:
    """Draw rounds with ``draw(start, count)`` (pass/fail of samples start..start+count-1)
    until ``settled_label`` says the label is settled or ``max_samples`` are drawn."""
    k = n = rounds = 0
    while True:
        label = settled_label(k, n, band, cfg)
        if label is not None:
            return Outcome(k, n, rounds, label)
        count = next_round(n, cfg)
        results = draw(n, count)
        if len(results) != count:
            raise ValueError(f"draw returned {len(results)} results for {count} samples")
        k += sum(results)
        n += count
        rounds += 1
