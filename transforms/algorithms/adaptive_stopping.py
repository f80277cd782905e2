"""Adaptive sampling: draw a task's samples in rounds and stop once its band label is settled.

A task's label comes from its pass rate and ``BandConfig`` (``too_hard < rate < too_easy`` is
``keep``). After each round, ``settled_label`` says whether more samples could still change
the label at the chosen confidence:

- the label the whole budget would give is already certain: every outcome of the samples
  still to come gives ``k + j`` passes of ``max_samples`` with the same label (with the band
  (0.1, 0.9) and 16 samples, 2 passes and 2 failures settle ``keep``). Such a label is always
  the one a fixed-K run on the same samples gives;
- an edge strictly inside (0, 1) is decided by the Wilson interval
(``transforms.algorithms.stats``):
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
Whatever settles it, the label equals ``band.classify(k / n)`` (tested), so the Filter stage
labels an early-stopped task from its pass rate like any other.
What it does NOT do: use other tasks' outcomes (no prior across tasks), or reorder samples.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from statistics import NormalDist

from tasksieve.transforms.algorithms.stats import BandConfig, Difficulty, wilson_interval


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


def budget_label(k: int, n: int, remaining: int, band: BandConfig) -> Difficulty | None:
    """The label of ``k`` passes in ``n + remaining`` samples if no outcome of the
    ``remaining`` ones can change it, else None (the band is monotone in the rate, so the
    two extremes decide)."""
    total = n + remaining
    low, high = band.classify(k / total), band.classify((k + remaining) / total)
    return low if low == high else None


def settled_label(
    k: int, n: int, band: BandConfig, cfg: AdaptiveConfig, remaining: int | None = None
) -> Difficulty | None:
    """The label of a task with ``k`` passes in ``n`` samples if settled, else None.

    ``remaining``: samples that may still be drawn (default ``max_samples - n``; fewer when
    samples were lost, e.g. to infra errors).
    """
    if remaining is None:
        remaining = cfg.max_samples - n
    if n == 0:
        return None
    if remaining <= 0:
        return band.classify(k / n)
    certain = budget_label(k, n, remaining, band)
    if certain is not None:
        return certain
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


def schedule(cfg: AdaptiveConfig) -> list[tuple[int, int]]:
    """Every round as (first sample index, samples drawn): the first round, then rounds of
    ``round_size`` until ``max_samples`` (16 in rounds of 4: (0, 4), (4, 4), (8, 4), (12, 4))."""
    rounds, n = [], 0
    while (count := next_round(n, cfg)) > 0:
        rounds.append((n, count))
        n += count
    return rounds


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
