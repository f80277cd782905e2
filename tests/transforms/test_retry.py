"""Retries of infra errors, the band-settling rule, and flakiness vs infra in gates and Verify.

The retry loop's unit tests use a verifier double that fails N times; everything that goes
through gates or Verify uses the real process sandbox and the real Python verifier, with its
environment broken on purpose (an interpreter path that does not exist in the sandbox).
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from tasksieve.schemas import TaskRecord, Verdict
from tasksieve.transforms.algorithms.settle import band_settled
from tasksieve.transforms.algorithms.stats import BandConfig
from tasksieve.transforms.reliability.gates import GatesConfig, run_gates
from tasksieve.transforms.rollouts.rounds import ROLLOUTS, VerifyFn
from tasksieve.transforms.runtime.items import Scored
from tasksieve.transforms.samplers import Samples
from tasksieve.verifiers import Sandbox, SandboxConfig, Verifier
from tasksieve.verifiers.families.python.verifier import PythonVerifier
from tasksieve.verifiers.retry import RetryPolicy, verify_with_retry
from tests.transforms.add_task import add_task, item_of

FAST = RetryPolicy(attempts=3, base_s=0.01, max_s=0.05)
GOOD = "def add(a, b):\n    return a + b\n"
BAD = "def add(a, b):\n    return a - b\n"
BROKEN_MARK = "# run me in the broken environment\n"


class _FailsFirst:
    """A verification that reports ``infra_error`` on its first ``n`` calls, then ``final``."""

    def __init__(self, n: int, final: str = "pass") -> None:
        self.n, self.final, self.calls = n, final, 0

    def __call__(self) -> Verdict:
        self.calls += 1
        if self.calls <= self.n:
            return Verdict(status="infra_error", detail=f"worker died (call {self.calls})")
        return Verdict(status=self.final)


class _BrokenThenHealed(Verifier):
    """The real Python verifier whose interpreter is missing for its first ``n`` calls."""

    family = "code"

    def __init__(self, sandbox: Sandbox, n: int) -> None:
        super().__init__(sandbox)
        self.broken = PythonVerifier(sandbox, python="/nonexistent/python3")
        self.good = PythonVerifier(sandbox)
        self.n, self.calls = n, 0

    def verify(self, task: TaskRecord, solution: str) -> Verdict:
        self.calls += 1
        return (self.broken if self.calls <= self.n else self.good).verify(task, solution)


class _PartlyBroken(Verifier):
    """The real Python verifier; solutions carrying ``BROKEN_MARK`` run where it is broken."""

    family = "code"

    def __init__(self, sandbox: Sandbox) -> None:
        super().__init__(sandbox)
        self.broken = PythonVerifier(sandbox, python="/nonexistent/python3")
        self.good = PythonVerifier(sandbox)

    def verify(self, task: TaskRecord, solution: str) -> Verdict:
        target = self.broken if BROKEN_MARK in solution else self.good
        return target.verify(task, solution)


# ---------------------------------------------------------------- the retry loop
@pytest.mark.parametrize(
    "kwargs",
    [
        {"attempts": 0},
        {"base_s": -1.0},
        {"base_s": 2.0, "max_s": 1.0},
        {"factor": 0.5},
        {"jitter": 1.5},
    ],
)
def test_policy_refuses_nonsense(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="need"):
        RetryPolicy(**kwargs)


def test_delays_grow_exponentially_up_to_the_cap_and_jitter_only_shrinks_them() -> None:
    policy = RetryPolicy(attempts=8, base_s=1.0, factor=2.0, max_s=5.0, jitter=0.5)
    rng = random.Random(7)
    for attempt in range(1, 8):
        full = min(5.0, 2.0 ** (attempt - 1))
        d = policy.delay(attempt, rng)
        assert full * 0.5 <= d <= full
    assert RetryPolicy(jitter=0.0).delay(2, rng) == RetryPolicy().base_s * 2


@pytest.mark.parametrize("failures", [0, 1, 2])
def test_infra_errors_are_retried_until_a_verdict(failures: int) -> None:
    slept: list[float] = []
    fn = _FailsFirst(failures)
    out = verify_with_retry(fn, FAST, sleep=slept.append, rng=random.Random(1))
    assert out.verdict.status == "pass"
    assert out.attempts == failures + 1 == fn.calls
    assert out.recovered == (failures > 0)
    assert len(slept) == failures and len(out.errors) == failures


def test_retries_are_bounded_and_the_last_infra_error_is_kept() -> None:
    slept: list[float] = []
    fn = _FailsFirst(10)
    out = verify_with_retry(fn, FAST, sleep=slept.append)
    assert fn.calls == FAST.attempts and out.exhausted and not out.recovered
    assert out.verdict.detail == f"worker died (call {FAST.attempts})"
    assert len(slept) == FAST.attempts - 1


@pytest.mark.parametrize("status", ["fail", "error", "timeout"])
def test_a_real_verdict_is_never_retried(status: str) -> None:
    fn = _FailsFirst(0, final=status)
    out = verify_with_retry(fn, FAST, sleep=lambda s: None)
    assert fn.calls == 1 and out.verdict.status == status


# ---------------------------------------------------------------- settling the band
@pytest.mark.parametrize(
    ("k", "n", "missing", "band", "settled"),
    [
        (3, 7, 1, BandConfig(), True),  # keep whatever the missing one did
        (0, 7, 1, BandConfig(), False),  # a pass would move it from too_hard to keep
        (7, 7, 1, BandConfig(), False),  # a fail would move it from too_easy to keep
        (0, 0, 4, BandConfig(), False),  # nothing left
        (30, 60, 100, BandConfig(0.2, 0.8), True),  # the interval alone settles it
        (1, 2, 6, BandConfig(0.2, 0.8), False),  # too few to say
        (5, 5, 0, BandConfig(), True),
    ],
)
def test_band_settled(k: int, n: int, missing: int, band: BandConfig, settled: bool) -> None:
    ok, why = band_settled(k, n, missing, band)
    assert ok is settled
    assert f"{k}/{n}" in why or n == 0


def test_settled_agrees_with_brute_force_over_the_missing_outcomes() -> None:
    band = BandConfig(0.1, 0.9)
    for n in range(1, 9):
        for k in range(n + 1):
            for missing in range(1, 4):
                ok, _ = band_settled(k, n, missing, band)
                classes = {band.classify((k + j) / (n + missing)) for j in range(missing + 1)}
                if len(classes) == 1 and band.classify(k / n) in classes:
                    assert ok  # every outcome agrees: always settled


# ---------------------------------------------------------------- gates, real sandbox
def test_reference_in_a_broken_environment_is_infra_not_flaky(sandbox: Sandbox) -> None:
    verifier = PythonVerifier(sandbox, python="/nonexistent/python3")
    results, reason = run_gates(item_of(add_task(GOOD)), verifier, GatesConfig(retry=FAST))
    assert reason == "gate.infra_error"
    ref = next(r for r in results if r.gate == "reference_passes")
    assert f"infra_error after {FAST.attempts - 1} retries" in ref.detail
    assert "/nonexistent/python3" in ref.detail


def test_a_broken_environment_that_heals_within_the_retries_passes_the_gates(
    sandbox: Sandbox,
) -> None:
    verifier = _BrokenThenHealed(sandbox, n=FAST.attempts - 1)
    results, reason = run_gates(item_of(add_task(GOOD)), verifier, GatesConfig(retry=FAST))
    assert reason == ""
    ref = next(r for r in results if r.gate == "reference_passes")
    assert "pass after 2 retries" in ref.detail
    assert "infra errors retried" in ref.detail


def test_random_reference_is_flaky_and_the_detail_shows_the_disagreeing_statuses(
    sandbox: Sandbox,
) -> None:
    # one coin per run: 20 runs that all agree has probability 2 * 2**-20
    coin = "import random\n_OK = random.random() < 0.5\n\n"
    coin += "def add(a, b):\n    return a + b if _OK else 0\n"
    task = add_task(coin)
    results, reason = run_gates(
        item_of(task), PythonVerifier(sandbox), GatesConfig(reference_runs=20, retry=FAST)
    )
    assert reason == "gate.reference_flaky"
    ref = next(r for r in results if r.gate == "reference_passes")
    shown = ref.detail.split("(", 1)[1].split(")", 1)[0].split(", ")
    assert len(shown) == 20 and {"pass", "fail"} <= set(shown)


# ---------------------------------------------------------------- Verify, real sandbox
def _verify(verifier: Verifier, completions: list[str], band: BandConfig) -> list[Any]:
    fn = VerifyFn(SandboxConfig(), "run-test", band=band, retry=FAST)
    fn.setup()
    try:
        assert fn.verifiers is not None
        fn.verifiers._verifiers["code"] = verifier
        samples = Samples("t.add", completions, "m", "replay", len(completions))
        return list(fn.process((item_of(add_task(GOOD)), samples)))
    finally:
        fn.teardown()


def _rows(outs: list[Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[Scored]]:
    rollouts = [o.value for o in outs if getattr(o, "tag", None) == ROLLOUTS]
    rejected = [o.value for o in outs if getattr(o, "tag", None) == "rejected"]
    scored = [o for o in outs if isinstance(o, Scored)]
    return rollouts, rejected, scored


def test_one_sample_lost_to_infra_is_left_out_and_the_task_scored_on_the_rest(
    sandbox: Sandbox,
) -> None:
    completions = [GOOD, BAD, GOOD, BAD + BROKEN_MARK]
    rollouts, rejected, scored = _rows(_verify(_PartlyBroken(sandbox), completions, BandConfig()))
    assert not rejected
    (s,) = scored
    assert (s.n, s.k, s.requested) == (3, 2, 4)
    assert [r["verdict"]["status"] for r in rollouts].count("infra_error") == 1


def test_a_task_whose_remaining_samples_cannot_settle_the_band_is_rejected_with_evidence(
    sandbox: Sandbox,
) -> None:
    completions = [BAD, BAD, BAD + BROKEN_MARK]  # 0/2: one pass among the lost would keep it
    _, rejected, scored = _rows(_verify(_PartlyBroken(sandbox), completions, BandConfig()))
    assert not scored
    (row,) = rejected
    assert row["reason"] == "verify.infra_error"
    assert (row["n"], row["k"]) == (2, 0)
    assert "/nonexistent/python3" in row["detail"] and "could make it keep" in row["detail"]


def test_every_sample_lost_to_infra_rejects_theadd_task(sandbox: Sandbox) -> None:
    broken = PythonVerifier(sandbox, python="/nonexistent/python3")
    _, rejected, scored = _rows(_verify(broken, [GOOD, BAD], BandConfig()))
    assert not scored
    assert rejected[0]["reason"] == "verify.infra_error"
    assert "no sample left" in rejected[0]["detail"]


class _PartlyBrokenVerifyFn(VerifyFn):
    """Verify with the code verifier swapped for ``_PartlyBroken`` (runs inside Beam)."""

    def setup(self) -> None:
        super().setup()
        assert self.verifiers is not None and self.sandbox is not None
        self.verifiers._verifiers["code"] = _PartlyBroken(self.sandbox)


def test_verify_counts_retries_and_samples_left_out_in_beam_metrics() -> None:
    import apache_beam as beam
    from apache_beam.metrics.metric import MetricsFilter

    from tasksieve.transforms.runtime.common import NAMESPACE

    completions = [GOOD, BAD, BAD + BROKEN_MARK]
    pair = (
        item_of(add_task(GOOD)),
        Samples("t.add", completions, "m", "replay", len(completions)),
    )
    p = beam.Pipeline(runner="DirectRunner")
    fn = _PartlyBrokenVerifyFn(SandboxConfig(), "run-test", retry=FAST)
    _ = p | beam.Create([pair]) | beam.ParDo(fn).with_outputs(ROLLOUTS, "rejected", main="ok")
    result = p.run()
    result.wait_until_finish()
    found = result.metrics().query(MetricsFilter().with_namespace(NAMESPACE))["counters"]
    got = {c.key.metric.name: c.committed for c in found}
    assert got["verify.retries"] == FAST.attempts - 1
    assert got["verify.retry_exhausted"] == 1
    assert got["verify.samples_left_out"] == 1
    assert "verify.retry_recovered" not in got
