"""``verify_batch``: parts, order, and retries of infra errors one sample at a time."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from tasksieve.schemas import TaskRecord, Verdict
from tasksieve.verifiers.families.base import Verifier
from tasksieve.verifiers.families.batch import split, verify_batch
from tasksieve.verifiers.retry import RetryPolicy
from tasksieve.verifiers.sandbox.process.sandbox import ProcessSandbox

TASK = TaskRecord(
    id="b", family="code", prompt="p", reference_solution="x",
    verifier={"family": "code", "style": "check", "entry_point": "f", "test_code": "pass"},
)  # fmt: skip
NOW = RetryPolicy(attempts=3, base_s=0.0, max_s=0.0)


class Flaky(Verifier):
    """Judges "ok" as a pass; "flaky" is an infra error the first ``fails`` times."""

    family = "code"

    def __init__(self, fails: int, many: bool) -> None:
        super().__init__(ProcessSandbox.__new__(ProcessSandbox))
        self.fails, self.calls, self.parts = fails, [], []
        if many:
            self.verify_many = self._many  # type: ignore[attr-defined]

    def verify(self, task: TaskRecord, solution: str) -> Verdict:
        self.calls.append(solution)
        if solution == "flaky" and self.fails > 0:
            self.fails -= 1
            return Verdict(status="infra_error", detail="broken")
        return Verdict(status="pass" if solution in ("ok", "flaky") else "fail")

    def _many(self, task: TaskRecord, solutions: list[str]) -> list[Verdict]:
        self.parts.append(list(solutions))
        return [
            Verdict(status="infra_error", detail="entry") if s == "flaky" else self.verify(task, s)
            for s in solutions
        ]


def test_split_keeps_order_and_sizes() -> None:
    assert split(list("abcdefg"), 3) == [list("abc"), list("de"), list("fg")]
    assert split(list("ab"), 5) == [["a"], ["b"]]
    assert split([], 2) == []


def test_parts_go_to_verify_many_and_infra_errors_are_retried_alone() -> None:
    v = Flaky(fails=1, many=True)
    sols = ["ok", "bad", "flaky", "ok", "bad"]
    with ThreadPoolExecutor(2) as pool:
        outs = verify_batch(v, TASK, sols, NOW, pool, parts=2)
    assert [o.verdict.status for o in outs] == ["pass", "fail", "pass", "pass", "fail"]
    assert sorted(map(tuple, v.parts)) == [("ok", "bad"), ("ok", "bad", "flaky")]
    flaky = outs[2]
    assert flaky.attempts == 3 and flaky.errors == ("entry", "broken")  # entry, alone, alone
    assert all(o.attempts == 1 for i, o in enumerate(outs) if i != 2)


def test_without_verify_many_each_sample_is_verified_once() -> None:
    v = Flaky(fails=5, many=False)
    outs = verify_batch(v, TASK, ["ok", "flaky"], NOW)
    assert [o.verdict.status for o in outs] == ["pass", "infra_error"]
    assert outs[1].attempts == 3 and outs[1].exhausted
