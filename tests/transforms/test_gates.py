"""Gates on the real process sandbox and Python verifier."""

from __future__ import annotations

from typing import Any

import pytest

from tasksieve.schemas import TaskRecord, Verdict
from tasksieve.transforms.reliability.gates import GatesConfig, run_gates
from tasksieve.verifiers import Sandbox, Verifier
from tasksieve.verifiers.registry import get_verifier
from tests.transforms.add_task import ASSERTS, add_task, item_of


def test_good_task_passes_every_gate(sandbox: Sandbox) -> None:
    task = add_task("def add(a, b):\n    return a + b\n")
    results, reason = run_gates(item_of(task), get_verifier("code", sandbox), GatesConfig())
    assert reason == ""
    assert [r.gate for r in results] == ["enough_tests", "reference_passes", "trivial_fails"]
    assert all(r.passed for r in results)


def test_broken_reference_is_rejected(sandbox: Sandbox) -> None:
    task = add_task("def add(a, b):\n    return a - b\n")
    _, reason = run_gates(item_of(task), get_verifier("code", sandbox), GatesConfig())
    assert reason == "gate.reference_failed"


def test_too_few_tests_is_rejected_before_running(sandbox: Sandbox) -> None:
    task = add_task("def add(a, b):\n    return a + b\n", asserts=ASSERTS[:1])
    results, reason = run_gates(item_of(task), get_verifier("code", sandbox), GatesConfig())
    assert reason == "gate.too_few_tests"
    assert len(results) == 1


def test_tests_that_pass_anything_are_rejected(sandbox: Sandbox) -> None:
    task = add_task("def add(a, b):\n    return a + b\n", asserts=["assert True"] * 3)
    _, reason = run_gates(item_of(task), get_verifier("code", sandbox), GatesConfig())
    assert reason == "gate.trivial_passes"


class _Flaky(Verifier):
    """Passes on alternate calls: a reference whose outcome depends on luck."""

    family = "code"

    def __init__(self) -> None:
        self.calls = 0

    def verify(self, task: TaskRecord, solution: str) -> Verdict:
        self.calls += 1
        ok = self.calls % 2 == 1 and bool(solution)
        return Verdict(status="pass" if ok else "fail", tests_total=3, tests_passed=3 * ok)


def test_flaky_reference_is_rejected() -> None:
    task = add_task("def add(a, b):\n    return a + b\n")
    _, reason = run_gates(item_of(task), _Flaky(), GatesConfig(reference_runs=2))
    assert reason == "gate.reference_flaky"


@pytest.mark.parametrize("kwargs", [{"reference_runs": 0}, {"min_code_tests": 0}])
def test_config_rejects_nonsense(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="need"):
        GatesConfig(**kwargs)
