"""verifiers.rewards.reward: each kind and penalty, bounds, and no reward for an infra error."""

from __future__ import annotations

import itertools
import math
from typing import Any

import pytest

from tasksieve.schemas import LimitPenalty, RewardSpec, RuntimePenalty, Verdict
from tasksieve.schemas.reward import REWARD_MAX, REWARD_MIN
from tasksieve.verifiers.rewards import NoReward, Reward, reward

BINARY = RewardSpec()
FRACTION = RewardSpec(kind="fraction")


def _v(status: str, passed: int = 0, total: int = 4, **kw: Any) -> Verdict:
    return Verdict.model_validate(
        {"status": status, "tests_passed": passed, "tests_total": total, **kw}
    )


def _value(verdict: Verdict, spec: RewardSpec, reference_s: float | None = None) -> float:
    got = reward(verdict, spec, reference_s)
    assert isinstance(got, Reward)
    return got.value


@pytest.mark.parametrize(
    ("status", "passed", "expected"),
    [("pass", 4, 1.0), ("fail", 3, 0.0), ("fail", 0, 0.0), ("error", 0, 0.0), ("timeout", 2, 0.0)],
)
def test_binary_is_one_for_pass_else_zero(status: str, passed: int, expected: float) -> None:
    assert _value(_v(status, passed), BINARY) == expected


@pytest.mark.parametrize(
    ("status", "passed", "total", "expected"),
    [
        ("pass", 4, 4, 1.0),
        ("fail", 3, 4, 0.75),
        ("fail", 1, 4, 0.25),
        ("fail", 0, 4, 0.0),
        ("error", 3, 4, 0.0),  # crashed: no credit for the checks before the crash
        ("timeout", 3, 4, 0.0),  # stopped: partial credit never rewards running out the clock
        ("fail", 0, 0, 0.0),  # no checks counted
        ("fail", 4, 4, 0.75),  # a fail stays below a pass even when its counters say 4/4
        ("pass", 0, 0, 1.0),
    ],
)
def test_fraction_credits_checks_passed(
    status: str, passed: int, total: int, expected: float
) -> None:
    assert _value(_v(status, passed, total), FRACTION) == pytest.approx(expected)


def test_infra_error_has_no_reward() -> None:
    got = reward(_v("infra_error", detail="sandbox died"), FRACTION)
    assert got == NoReward("sandbox died")
    assert not isinstance(got, Reward)


SLOW = RewardSpec(runtime=RuntimePenalty(over=2.0, weight=0.1, cap=0.3))


@pytest.mark.parametrize(
    ("duration", "reference", "penalty"),
    [
        (1.0, 1.0, 0.0),  # as fast as the reference
        (2.0, 1.0, 0.0),  # exactly at the threshold
        (4.0, 1.0, 0.2),  # 2 multiples beyond: 2 x 0.1
        (100.0, 1.0, 0.3),  # capped
        (5.0, None, 0.0),  # reference not measured: no penalty
        (5.0, 0.0, 0.0),
    ],
)
def test_runtime_penalty_grows_beyond_the_threshold_up_to_its_cap(
    duration: float, reference: float | None, penalty: float
) -> None:
    got = reward(_v("pass", 4, duration_s=duration), SLOW, reference)
    assert isinstance(got, Reward)
    assert got.components.runtime_penalty == pytest.approx(penalty)
    assert got.value == pytest.approx(1.0 - penalty)


def test_runtime_penalty_records_the_ratio() -> None:
    got = reward(_v("fail", 1, duration_s=3.0), SLOW, 1.5)
    assert isinstance(got, Reward)
    assert got.components.runtime_ratio == pytest.approx(2.0)


def test_runtime_penalty_skips_runs_that_did_not_finish() -> None:
    got = reward(_v("timeout", duration_s=50.0, limit_hit="wall"), SLOW, 1.0)
    assert isinstance(got, Reward)
    assert got.components.runtime_penalty == 0.0


@pytest.mark.parametrize("limit", ["wall", "cpu", "memory", "output"])
def test_limit_penalty_applies_to_every_limit_by_default(limit: str) -> None:
    spec = RewardSpec(limits=LimitPenalty(weight=0.25))
    assert _value(_v("timeout", limit_hit=limit), spec) == pytest.approx(-0.25)


def test_limit_penalty_only_for_the_limits_it_names() -> None:
    spec = RewardSpec(kind="fraction", limits=LimitPenalty(weight=0.5, limits=["memory"]))
    assert _value(_v("fail", 2, 4, limit_hit="output"), spec) == pytest.approx(0.5)
    assert _value(_v("fail", 2, 4, limit_hit="memory"), spec) == pytest.approx(0.0)


def test_no_limit_hit_no_penalty() -> None:
    spec = RewardSpec(limits=LimitPenalty(weight=1.0))
    assert _value(_v("pass", 4), spec) == 1.0


def test_value_is_base_less_penalties() -> None:
    spec = RewardSpec(
        kind="fraction",
        runtime=RuntimePenalty(over=1.0, weight=1.0, cap=1.0),
        limits=LimitPenalty(weight=1.0),
    )
    got = reward(_v("fail", 1, 2, duration_s=9.0, limit_hit="output"), spec, 1.0)
    assert isinstance(got, Reward)
    c = got.components
    assert (c.base, c.runtime_penalty, c.limit_penalty) == (0.5, 1.0, 1.0)
    assert got.value == c.base - c.runtime_penalty - c.limit_penalty


SPECS = [
    RewardSpec(kind=kind, runtime=rt, limits=lim)
    for kind in ("binary", "fraction")
    for rt in (None, RuntimePenalty(over=1.0, weight=1.0, cap=1.0))
    for lim in (None, LimitPenalty(weight=1.0))
]
VERDICTS = [
    _v(status, passed, total, duration_s=d, limit_hit=lim)
    for status, (passed, total), d, lim in itertools.product(
        ("pass", "fail", "error", "timeout"),
        ((0, 0), (0, 5), (3, 5), (5, 5), (9, 5)),
        (0.0, 1e-9, 1.0, 1e6),
        (None, "wall", "output"),
    )
]


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.model_dump_json())
def test_every_value_is_finite_and_within_bounds(spec: RewardSpec) -> None:
    for verdict in VERDICTS:
        for reference in (None, 1e-9, 1.0):
            value = _value(verdict, spec, reference)
            assert math.isfinite(value)
            assert REWARD_MIN <= value <= REWARD_MAX
