"""Gates: a task must have a verifier, enough tests, a passing reference and failing trivia.

The reference runs ``reference_runs`` times (default 3); runs that disagree (some pass, some
do not) reject the task as ``gate.reference_flaky``, with every run's status in the detail.
Each run (and each trivial solution) that hits ``infra_error`` is retried under
``GatesConfig.retry`` (``verifiers.retry``): a broken environment is not flakiness. One that
still fails after its retries rejects the task as ``gate.infra_error`` with the errors met.
Counters: ``gates.retries``, ``gates.retry_recovered``, ``gates.retry_exhausted``.

Repo tasks (``verifiers.families.repo``) also need their snapshot and environment
(``repo.snapshot``, ``repo.environment``, ``repo.too_large``, checked before any run), at least
two reference runs (a test whose outcome differs between them is named as flaky), every asked
test id reported (``repo.tests_missing``), and the empty patch judged test by test
(``repo.fail_to_pass_passes_before``, ``repo.pass_to_pass_fails_before``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import apache_beam as beam
from apache_beam.typehints.decorators import no_annotations

from tasksieve.schemas import CodeSpec, GateResult, TaskRecord
from tasksieve.schemas.repo import RepoSpec
from tasksieve.transforms.reliability.cached import CachedStage
from tasksieve.transforms.rollouts.cache.detectors import DetectorCache, settings
from tasksieve.transforms.runtime.common import count, rejected
from tasksieve.transforms.runtime.deadletter import Guarded
from tasksieve.transforms.runtime.items import Item, rejection
from tasksieve.transforms.runtime.worker_sandbox import SandboxDoFn
from tasksieve.verifiers import SandboxConfig, Verifier
from tasksieve.verifiers.families.repo.gate_checks import (
    empty_patch_problem,
    flaky_tests,
    missing_tests,
)
from tasksieve.verifiers.families.repo.verifier import RepoVerifier
from tasksieve.verifiers.retry import RetryOutcome, RetryPolicy, verify_with_retry

log = logging.getLogger("tasksieve.gates")


@dataclass(frozen=True)
class GatesConfig:
    """Reference runs (flakiness check), the minimum number of tests for code tasks, and the
    retry policy for verifications that hit infra errors."""

    reference_runs: int = 3
    min_code_tests: int = 3
    retry: RetryPolicy = field(default_factory=RetryPolicy)

    def __post_init__(self) -> None:
        if self.reference_runs < 1:
            raise ValueError(f"need reference_runs >= 1, got {self.reference_runs}")
        if self.min_code_tests < 1:
            raise ValueError(f"need min_code_tests >= 1, got {self.min_code_tests}")


def run_gates(item: Item, verifier: Verifier, cfg: GatesConfig) -> tuple[list[GateResult], str]:
    """Apply every gate in order; return the results and the failing reason ('' if none)."""
    task = item.task
    results: list[GateResult] = []
    spec = task.verifier
    if isinstance(spec, CodeSpec):
        n_tests = spec.test_count()
        ok = n_tests >= cfg.min_code_tests
        results.append(GateResult(gate="enough_tests", passed=ok, detail=f"{n_tests} tests"))
        if not ok:
            return results, "gate.too_few_tests"
    repo = isinstance(spec, RepoSpec)
    if repo and isinstance(verifier, RepoVerifier):
        problem = verifier.task_problem(task)
        if problem is not None:
            results.append(GateResult(gate="repo_task", passed=False, detail=str(problem)[:1000]))
            return results, problem.reason
    ref = task.reference_solution
    n_runs = max(cfg.reference_runs, 2) if repo else cfg.reference_runs
    runs = [_verify(verifier, task, ref, cfg) for _ in range(n_runs)]
    outcomes = [r.verdict for r in runs]
    passes = sum(v.passed for v in outcomes)
    exhausted = [r for r in runs if r.exhausted]
    results.append(
        GateResult(
            gate="reference_passes",
            passed=passes == len(outcomes),
            detail=_runs_detail(runs),
            duration_s=max(v.duration_s for v in outcomes),
        )
    )
    if exhausted:
        return results, "gate.infra_error"
    if repo:
        reason = _repo_reference(results, outcomes)
        if reason:
            return results, reason
    if passes == 0:
        return results, "gate.reference_failed"
    if passes < len(outcomes):
        return results, "gate.reference_flaky"
    for trivial in verifier.trivial_solutions(task):
        out = _verify(verifier, task, trivial, cfg)
        v = out.verdict
        if out.exhausted:
            why = f"infra error after {out.attempts} attempts: {v.detail}"
            results.append(GateResult(gate="trivial_fails", passed=False, detail=why[:300]))
            return results, "gate.infra_error"
        if v.passed:
            shown = trivial.strip().splitlines()[0] if trivial.strip() else "<empty>"
            results.append(GateResult(gate="trivial_fails", passed=False, detail=shown[:200]))
            return results, "gate.trivial_passes"
        before = empty_patch_problem(v) if repo and not trivial.strip() else None
        if before is not None:
            results.append(GateResult(gate="empty_patch", passed=False, detail=before[1][:1000]))
            return results, before[0]
    results.append(GateResult(gate="trivial_fails", passed=True))
    return results, ""


def cached_gates(
    cache: DetectorCache | None, item: Item, verifier: Verifier, cfg: GatesConfig
) -> tuple[list[GateResult], str]:
    """``run_gates``, looked up by content first (``rollouts.cache.detectors``); an outcome
    with an infra error is not stored, and ``repo`` tasks never are."""
    if cache is None:
        return run_gates(item, verifier, cfg)
    key = cache.key("gates", item.task, settings(cfg), verifier.trivial_solutions(item.task))
    stored = cache.get("gates", item.task, key)
    if stored is not None:
        try:
            return [GateResult.model_validate(r) for r in stored["results"]], str(stored["reason"])
        except (ValueError, TypeError, KeyError):
            count("cache.corrupt_entries")
    results, reason = run_gates(item, verifier, cfg)
    if reason != "gate.infra_error":
        dumped = [r.model_dump(mode="json") for r in results]
        cache.put(item.task, key, {"results": dumped, "reason": reason})
    return results, reason


def _repo_reference(results: list[GateResult], verdicts: list[Any]) -> str:
    """A repo task's reference runs: asked ids that do not exist, then flaky tests."""
    missing = sorted(
        {i for v in verdicts if v.status in ("pass", "fail") for i in missing_tests(v)}
    )
    if missing:
        detail = f"test ids that do not exist or do not collect: {', '.join(missing[:20])}"
        results.append(GateResult(gate="tests_exist", passed=False, detail=detail))
        return "repo.tests_missing"
    flaky = flaky_tests(verdicts)
    if flaky and any(v.passed for v in verdicts):
        shown = ", ".join(flaky[:20])
        results[-1] = results[-1].model_copy(
            update={
                "detail": f"flaky tests (outcome differs between runs): {shown}; "
                + results[-1].detail
            }
        )
        return "gate.reference_flaky"
    return ""


def _verify(verifier: Verifier, task: TaskRecord, solution: str, cfg: GatesConfig) -> RetryOutcome:
    out = verify_with_retry(lambda: verifier.verify(task, solution), cfg.retry)
    count_retry("gates", out)
    return out


def count_retry(stage: str, out: RetryOutcome) -> None:
    """Count one verification's retries: ``<stage>.retries``, ``.retry_recovered``,
    ``.retry_exhausted``."""
    if out.retries:
        count(f"{stage}.retries", out.retries)
    if out.recovered:
        count(f"{stage}.retry_recovered")
    if out.exhausted:
        count(f"{stage}.retry_exhausted")


def _runs_detail(runs: list[RetryOutcome]) -> str:
    """``2/3 runs passed (pass, fail, pass)``, then each distinct failure and the infra errors
    that retries met."""
    verdicts = [r.verdict for r in runs]
    passes = sum(v.passed for v in verdicts)
    shown = []
    for r in runs:
        status = r.verdict.status
        shown.append(f"{status} after {r.retries} retries" if r.retries else status)
    text = f"{passes}/{len(runs)} runs passed ({', '.join(shown)})"
    failures = sorted({f"{v.status}: {v.detail}"[:300] for v in verdicts if not v.passed})
    if failures:
        text += "; " + "; ".join(failures)
    met = [e for r in runs for e in r.errors]
    if met and any(not r.exhausted for r in runs if r.errors):
        text += f"; {len(met)} infra errors retried, e.g. {met[0][:150]}"
    return text


class GatesFn(SandboxDoFn, CachedStage):
    """Run the gates for each item; reject with the first failing gate's reason. With a
    rollout cache directory, a task's gate outcome is looked up by content first
    (``reliability.cached``)."""

    def __init__(
        self, cfg: GatesConfig, sandbox: SandboxConfig, run_id: str, cache_dir: str | None = None
    ) -> None:
        super().__init__(sandbox, run_id)
        self.cfg = cfg
        self.init_cache(cache_dir, sandbox)

    def setup(self) -> None:
        super().setup()
        self.setup_cache()

    def finish_bundle(self) -> None:
        self.flush_cache()

    def process(self, item: Item) -> Iterator[Any]:
        verifier = self.verifier_for(item, "gates")
        if isinstance(verifier, dict):
            yield rejected(verifier)
            return
        results, reason = cached_gates(self.detector_cache, item, verifier, self.cfg)
        log.info("gates %s: %s", item.id, reason or "passed")
        if reason:
            failed = next((r for r in results if not r.passed), results[-1])
            yield rejected(
                rejection(
                    stage="gates",
                    reason=reason,
                    detail=f"{failed.gate}: {failed.detail}",
                    run_id=self.run_id,
                    item=item,
                )
            )
            return
        count("gates.passed")
        ref_s = next((g.duration_s for g in results if g.gate == "reference_passes"), None)
        if isinstance(verifier, RepoVerifier):  # the prompt's file listing (families.repo.prompt)
            item = replace(item, task=verifier.with_listing(item.task))
        yield replace(item, gates=[*item.gates, *results], reference_s=ref_s)


class Gates(beam.PTransform):
    """Reject tasks that cannot give a meaningful reward, recording every gate's result."""

    def __init__(
        self, cfg: GatesConfig, sandbox: SandboxConfig, run_id: str, cache_dir: str | None = None
    ) -> None:
        super().__init__()
        self.cfg = cfg
        self.sandbox = sandbox
        self.run_id = run_id
        self.cache_dir = cache_dir

    @no_annotations
    def expand(self, items: beam.PCollection) -> dict[str, beam.PCollection]:
        run = beam.ParDo(GatesFn(self.cfg, self.sandbox, self.run_id, self.cache_dir))
        return items | "Run" >> Guarded(run, "gates", self.run_id)
