"""The trainer's reward function: parallel verdicts equal one-by-one ones; infra errors retried.

The verifiers and sandbox are the real ones (process backend); only the infra-error tests
put a wrapper in front of the real verifier that reports a broken environment a given
number of times, since a real sandbox cannot be made to fail on cue.
"""

from __future__ import annotations

import shutil
import threading
from typing import Any

import pytest

from benchmarks.humaneval_jobs import jobs
from tasksieve.pipeline.train.rewards import (
    BatchVerifier,
    RetryPolicy,
    VerificationFailed,
    VerifierReward,
    batch_metrics,
    completion_text,
)
from tasksieve.schemas import TaskRecord, Verdict
from tasksieve.verifiers import SandboxConfig, Verifier
from tasksieve.verifiers.registry import VerifierCache

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")

JOBS = jobs(3)  # 3 HumanEval problems, each right once and wrong once
TASKS = [j.task() for j in JOBS]
COMPLETIONS = [f"Here you go:\n```python\n{j.solution}```\n" for j in JOBS]


@pytest.fixture
def batch() -> Any:
    bv = BatchVerifier(SandboxConfig(), workers=4, retry=RetryPolicy(retries=2, backoff_s=0.0))
    yield bv
    bv.close()


def test_batch_verdicts_equal_one_by_one(batch: BatchVerifier) -> None:
    scored = batch.score(TASKS, COMPLETIONS)
    code = batch.verifiers.get("code")
    one_by_one = [code.verify(t, s.solution) for t, s in zip(TASKS, scored, strict=True)]
    assert [s.verdict.status for s in scored] == [v.status for v in one_by_one]
    assert [s.verdict.passed for s in scored] == [j.expect_pass for j in JOBS]
    assert [s.reward.value for s in scored] == [1.0 if j.expect_pass else 0.0 for j in JOBS]


class _Flaky(Verifier):
    """The real verifier behind a stand-in for a broken sandbox: ``fails`` infra errors first."""

    def __init__(self, real: Verifier, fails: int) -> None:
        self.real, self.fails, self.calls = real, fails, 0
        self.lock = threading.Lock()

    def verify(self, task: TaskRecord, solution: str) -> Verdict:
        with self.lock:
            self.calls += 1
            broken = self.calls <= self.fails
        if broken:
            return Verdict(status="infra_error", detail="sandbox lost")
        return self.real.verify(task, solution)

    def close(self) -> None:
        self.real.close()


class _FlakyCache(VerifierCache):
    def __init__(self, inner: VerifierCache, fails: int) -> None:
        super().__init__(inner.sandbox)
        self.flaky = _Flaky(inner.get("code"), fails)

    def get(self, family: str) -> Verifier:
        return self.flaky


def test_infra_error_is_retried_until_a_real_verdict(batch: BatchVerifier) -> None:
    batch.verifiers = _FlakyCache(batch.verifiers, fails=2)
    (scored,) = batch.score(TASKS[:1], COMPLETIONS[:1])
    assert scored.verdict.status == "pass" and scored.attempts == 3
    assert scored.reward.value == 1.0


def test_persistent_infra_error_fails_loudly(batch: BatchVerifier) -> None:
    batch.verifiers = _FlakyCache(batch.verifiers, fails=3)  # 1 try + 2 retries, all broken
    with pytest.raises(VerificationFailed, match="infra_error after 3 attempts: sandbox lost"):
        batch.score(TASKS[:1], COMPLETIONS[:1])


def test_reward_function_speaks_trl(batch: BatchVerifier) -> None:
    fn = VerifierReward(batch)
    metrics: dict[str, float] = {}
    messages = [[{"role": "assistant", "content": c}] for c in COMPLETIONS]
    values = fn(
        prompts=[[{"role": "user", "content": t.prompt}] for t in TASKS],
        completions=messages,
        task=[t.model_dump_json() for t in TASKS],
        reference_s=[None] * len(TASKS),
        log_metric=metrics.__setitem__,
        family=[t.family for t in TASKS],
    )
    assert values == [1.0 if j.expect_pass else 0.0 for j in JOBS]
    assert metrics["tasksieve/code/reward_mean"] == pytest.approx(0.5)
    assert metrics["tasksieve/code/reward_std"] == pytest.approx(0.5)
    assert metrics["tasksieve/pass_rate"] == pytest.approx(0.5)
    assert metrics["tasksieve/verify_seconds"] > 0


def test_metrics_split_by_family(batch: BatchVerifier) -> None:
    scored = batch.score(TASKS[:2], COMPLETIONS[:2])
    sql = scored[0].__class__(**{**scored[0].__dict__, "family": "sql"})
    m = batch_metrics([sql, scored[1]])
    assert (m["tasksieve/sql/reward_mean"], m["tasksieve/code/reward_mean"]) == (1.0, 0.0)


@pytest.mark.parametrize(
    ("completion", "text"),
    [("abc", "abc"), ([{"role": "assistant", "content": "x"}], "x"), ([], "")],
)
def test_completion_text(completion: Any, text: str) -> None:
    assert completion_text(completion) == text


@pytest.mark.parametrize(
    ("retries", "backoff"), [(-1, 0.0), (21, 0.0), (1, -1.0), (1, float("nan"))]
)
def test_bad_retry_policy(retries: int, backoff: float) -> None:
    with pytest.raises(ValueError):
        RetryPolicy(retries, backoff)
