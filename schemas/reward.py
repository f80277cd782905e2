"""The per-task reward spec and the reward components a rollout row carries.

A task's ``reward`` says how a verdict becomes a number (``verifiers.rewards.reward`` is the
one function that does it, for curation and training alike):

- ``kind``: ``binary`` scores 1.0 for ``pass`` and 0.0 for anything else; ``fraction`` scores
  ``tests_passed / tests_total`` for ``pass`` and ``fail`` verdicts and 0.0 for ``error`` and
  ``timeout`` (a program that crashed or was stopped earns nothing for the checks it got
  through before, so partial credit never rewards running out the clock);
- ``runtime``: an optional penalty for a solution slower than ``over`` times the reference's
  measured runtime: ``weight`` per further multiple of the reference, at most ``cap``;
- ``limits``: an optional penalty subtracted when the run hit a sandbox limit (wall or CPU
  time, memory, output size);
- ``test_weights``: weights of tagged tests in the ``fraction`` credit: a check whose name
  matches one of a tag's patterns weighs that tag's weight (the first tag that matches; 1
  when none does), so e.g. edge cases can count double;
- ``style``: an optional penalty for lint violations of the solution (ruff, run in the
  sandbox): ``weight`` times the violations per line over ``per_line_cap``, at most ``weight``.
  The style is measured where a caller runs the linter (``tasksieve eval`` does); a reward
  computed without a measurement carries no style penalty and says so (``style_checked``).

The value is ``base - runtime - limits - style``; it lies in [REWARD_MIN, REWARD_MAX] =
[-3, 1] (each penalty is at most 1). An ``infra_error`` verdict has no reward at all.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from tasksieve.schemas.strict import STRICT

RewardKind = Literal["binary", "fraction"]
LimitName = Literal["wall", "cpu", "memory", "output"]
LIMIT_NAMES: tuple[LimitName, ...] = ("wall", "cpu", "memory", "output")
REWARD_MIN, REWARD_MAX = -3.0, 1.0
"""Bounds of any reward value: a base in [0, 1] less three penalties of at most 1 each."""


class _Frozen(BaseModel):
    model_config = ConfigDict(**STRICT, frozen=True)


class RuntimePenalty(_Frozen):
    """Penalty for a run slower than ``over`` x the reference's runtime.

    penalty = min(cap, weight * (runtime / reference - over)) when the ratio exceeds ``over``;
    nothing when the reference's runtime was not measured.
    """

    over: float = Field(default=2.0, ge=1.0, le=1000.0)
    weight: float = Field(default=0.1, gt=0.0, le=1.0)
    cap: float = Field(default=0.5, gt=0.0, le=1.0)


class LimitPenalty(_Frozen):
    """Penalty subtracted once when the run hit one of ``limits``."""

    weight: float = Field(default=0.5, gt=0.0, le=1.0)
    limits: list[LimitName] = Field(default_factory=lambda: list(LIMIT_NAMES), min_length=1)


class WeightedTests(_Frozen):
    """A tag on some of a task's tests and their weight in the ``fraction`` credit.

    ``checks`` are shell-style patterns (``fnmatch``) over the verdict's check names, e.g.
    ``assert_4`` or ``test_negative_*`` (code), ``policy:*`` (config).
    """

    tag: str = Field(min_length=1, max_length=64)
    checks: list[str] = Field(min_length=1)
    weight: float = Field(gt=0.0, le=100.0)


class StylePenalty(_Frozen):
    """Penalty for lint violations: ``weight * min(1, violations per line / per_line_cap)``."""

    weight: float = Field(default=0.2, gt=0.0, le=1.0)
    per_line_cap: float = Field(default=0.2, gt=0.0, le=10.0)


class RewardSpec(_Frozen):
    """How a task's verdicts are scored (default: binary, no penalties)."""

    kind: RewardKind = "binary"
    runtime: RuntimePenalty | None = None
    limits: LimitPenalty | None = None
    test_weights: list[WeightedTests] = Field(default_factory=list)
    style: StylePenalty | None = None


class RewardComponents(_Frozen):
    """The parts of one reward: ``value == base - runtime_penalty - limit_penalty -
    style_penalty``."""

    kind: RewardKind
    base: float
    runtime_penalty: float = 0.0
    limit_penalty: float = 0.0
    runtime_ratio: float | None = Field(
        default=None, description="The run's time over the reference's, where both are known."
    )
    style_penalty: float = 0.0
    style_violations: int | None = Field(
        default=None, description="Lint violations found in the solution, where measured."
    )
    style_checked: bool = Field(
        default=False,
        description="Whether the style was measured (false: no style spec, or not measured).",
    )
