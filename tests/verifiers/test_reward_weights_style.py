"""Test weights in the fraction credit, and the style penalty (ruff, run in the sandbox)."""

from __future__ import annotations

import pytest

from tasksieve.schemas import CheckResult, RewardSpec, Verdict
from tasksieve.schemas.reward import StylePenalty, WeightedTests
from tasksieve.verifiers import SandboxConfig
from tasksieve.verifiers.rewards import Reward, Style, check_weight, lint, reward, style_penalty

EDGE = WeightedTests(tag="edge", checks=["assert_4", "edge_*"], weight=3.0)


def fail(*passed: bool) -> Verdict:
    checks = [CheckResult(name=f"assert_{i}", passed=p) for i, p in enumerate(passed)]
    return Verdict(status="fail", tests_passed=sum(passed), tests_total=len(passed), checks=checks)


def value(verdict: Verdict, spec: RewardSpec, style: Style | None = None) -> float:
    earned = reward(verdict, spec, None, style)
    assert isinstance(earned, Reward)
    return earned.value


def test_a_tagged_test_weighs_its_weight_in_partial_credit() -> None:
    spec = RewardSpec(kind="fraction", test_weights=[EDGE])
    assert value(fail(True, True, True, True, False), spec) == pytest.approx(4 / 7)
    assert value(fail(False, True, True, True, True), spec) == pytest.approx(6 / 7)
    unweighted = RewardSpec(kind="fraction")
    assert value(fail(True, True, True, True, False), unweighted) == pytest.approx(4 / 5)


def test_first_matching_tag_decides_and_untagged_weigh_one() -> None:
    other = WeightedTests(tag="slow", checks=["assert_*"], weight=2.0)
    assert check_weight("assert_4", [EDGE, other]) == 3.0
    assert check_weight("assert_1", [EDGE, other]) == 2.0
    assert check_weight("policy:port", [EDGE, other]) == 1.0


def test_weights_never_lift_a_fail_to_a_pass() -> None:
    spec = RewardSpec(kind="fraction", test_weights=[EDGE])
    # every check passed yet the verdict is a fail: less the lightest check, as unweighted
    assert value(fail(True, True, True, True, True), spec) == pytest.approx(6 / 7)
    assert value(fail(True, True), RewardSpec(kind="binary", test_weights=[EDGE])) == 0.0


@pytest.mark.parametrize("weight", [0.0, -1.0, 101.0])
def test_weights_out_of_range_are_refused(weight: float) -> None:
    with pytest.raises(ValueError):
        WeightedTests(tag="edge", checks=["a"], weight=weight)


def test_style_penalty_grows_with_violations_per_line_up_to_its_weight() -> None:
    spec = StylePenalty(weight=0.2, per_line_cap=0.5)
    assert style_penalty(Style(0, 10), spec) == 0.0
    assert style_penalty(Style(1, 10), spec) == pytest.approx(0.2 * 0.1 / 0.5)
    assert style_penalty(Style(50, 10), spec) == 0.2


def test_reward_subtracts_the_style_only_when_measured() -> None:
    spec = RewardSpec(style=StylePenalty(weight=0.2, per_line_cap=0.5))
    passed = Verdict(status="pass", tests_passed=1, tests_total=1)
    earned = reward(passed, spec, None, Style(5, 10))
    assert isinstance(earned, Reward) and earned.value == pytest.approx(0.8)
    assert earned.components.style_checked and earned.components.style_violations == 5
    unmeasured = reward(passed, spec)
    assert isinstance(unmeasured, Reward) and unmeasured.value == 1.0
    assert not unmeasured.components.style_checked


def test_lint_runs_ruff_inside_the_sandbox() -> None:
    sandbox = SandboxConfig().make()
    try:
        styles = lint(sandbox, ["import os\n\nx = 1\n", "def f():\n    return 1\n", "def g(:\n"])
    finally:
        sandbox.close()
    assert styles is not None
    assert [s.violations for s in styles[:2]] == [1, 0]  # F401: os imported but unused
    assert styles[2].violations >= 1 and [s.lines for s in styles] == [2, 2, 1]
