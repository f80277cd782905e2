"""Turn a verdict into a reward with the task's reward spec: one function for curation and training.

``reward`` returns a ``Reward`` or, for an ``infra_error`` verdict, a ``NoReward``: a broken
sandbox says nothing about the solution, so the type makes the caller decide (retry, reject,
fail the training step) instead of scoring 0. What this does NOT do: retry anything, or
judge whether a verdict's timing is trustworthy (a loaded machine inflates ``duration_s``
and so the runtime penalty; the reference's runtime is measured on the same machine).
See ``tasksieve.schemas.reward`` for the spec and the meaning of each kind and penalty.
"""

from __future__ import annotations

from dataclasses import dataclass

from tasksieve.schemas import RewardComponents, RewardSpec, Verdict


@dataclass(frozen=True)
class Reward:
    """A scored verdict: ``value == components.base - penalties``."""

    value: float
    components: RewardComponents


@dataclass(frozen=True)
class NoReward:
    """An ``infra_error`` verdict: it must be retried or reported, never scored."""

    detail: str


def base_score(verdict: Verdict, spec: RewardSpec) -> float:
    """The reward before penalties: 1 for a pass, partial credit for a ``fraction`` fail."""
    if verdict.status == "pass":
        return 1.0
    if spec.kind == "binary" or verdict.status != "fail" or verdict.tests_total <= 0:
        return 0.0
    total = verdict.tests_total
    # a fail whose counters say every check passed still scores below a pass
    passed = min(max(verdict.tests_passed, 0), total - 1)
    return passed / total


def runtime_ratio(verdict: Verdict, reference_s: float | None) -> float | None:
    """The run's time over the reference's, or None where either is unknown or zero."""
    if reference_s is None or reference_s <= 0 or verdict.duration_s <= 0:
        return None
    return verdict.duration_s / reference_s


def reward(
    verdict: Verdict, spec: RewardSpec, reference_s: float | None = None
) -> Reward | NoReward:
    """Score ``verdict`` by ``spec``; ``reference_s`` is the reference's measured runtime.

    The runtime penalty applies to runs that finished (``pass`` or ``fail``), the limits
    penalty to any run whose ``limit_hit`` is one of the spec's limits.
    """
    if verdict.status == "infra_error":
        return NoReward(verdict.detail or "infra_error")
    base = base_score(verdict, spec)
    ratio = runtime_ratio(verdict, reference_s)
    slow = 0.0
    rt = spec.runtime
    if rt is not None and ratio is not None and verdict.status in ("pass", "fail"):
        slow = min(rt.cap, max(0.0, rt.weight * (ratio - rt.over)))
    hit = 0.0
    lim = spec.limits
    if lim is not None and verdict.limit_hit in lim.limits:
        hit = lim.weight
    parts = RewardComponents(
        kind=spec.kind, base=base, runtime_penalty=slow, limit_penalty=hit, runtime_ratio=ratio
    )
    return Reward(base - slow - hit, parts)
