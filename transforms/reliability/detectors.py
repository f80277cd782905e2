"""TestStrength and Ambiguity: thin Beam wrappers over ``tasksieve.verifiers.reliability``.

- ``TestStrength`` (after Gates): mutation testing of each task's own tests; a task whose
  mutation score is below ``StrengthConfig.min_score`` is rejected as ``gate.weak_tests`` with
  the surviving mutants (diff, input, both outputs) in the detail; kept tasks carry the
  counts (``Item.strength``, the ``test_strength`` column).
- ``Ambiguity`` (between Verify and Filter): the passing samples and the reference on extra
  inputs; ambiguous tasks are rejected as ``filter.ambiguous`` with the inputs, the differing
  outputs and the samples; kept tasks carry the counts (the ``ambiguity`` column).

A family without a differ (``get_differ`` raises) passes through unmeasured (column null,
counter ``<stage>.unsupported``), and so does every task when the sandbox hands whole
verifications to the sandbox service (``--sandbox remote``): the service has no endpoint for
observing solutions on probes yet, and a worker of a remote run has no sandbox of its own
(counter ``<stage>.remote``; a warning says so once per worker). An infra error that leaves
the whole measurement undecided rejects the task with the stage's infra reason rather than
keeping or condemning it blind.
Counters: ``strength.tasks`` (tasks measured, kept or rejected), ``strength.rejected`` (of
those, rejected here), ``strength.mutants``, ``strength.killed``, ``strength.survived``,
``strength.equivalent``, ``strength.undecided``, ``strength.unprobed``, ``strength.ms`` (wall
milliseconds);
``ambiguity.tasks``, ``ambiguity.rejected``, ``ambiguity.probes``, ``ambiguity.disagreements``,
``ambiguity.dropped`` (inputs outside the task's contract), ``ambiguity.not_enough_evidence``
(kept tasks whose agreement could not be tested: too few distinct passing samples or valid
inputs), ``ambiguity.ms``.
With the run's rollout cache (``--rollout-cache``, on unless ``--no-cache``), a task's report is
looked up by content first and measured only on a miss (``cached``; what a key holds:
``transforms.rollouts.cache.detectors``); counters ``cache.test_strength_hits`` and
``cache.ambiguity_hits`` (and ``_misses``).
The stage order decides the reason when both faults are present: TestStrength runs before
sampling, so a task whose tests let mutants through is ``gate.weak_tests`` even if its
samples would also disagree; ``filter.ambiguous`` is left for tasks with strong tests.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import apache_beam as beam
from apache_beam.typehints.decorators import no_annotations

from tasksieve.schemas import AmbiguityCheck, StrengthCheck, SurvivingMutant
from tasksieve.transforms.reliability import cached
from tasksieve.transforms.reliability.cached import CachedStage
from tasksieve.transforms.runtime.common import count, rejected
from tasksieve.transforms.runtime.deadletter import Guarded
from tasksieve.transforms.runtime.items import Item, Scored, rejection
from tasksieve.transforms.runtime.worker_sandbox import SandboxDoFn
from tasksieve.verifiers import SandboxConfig, UnsupportedFamily
from tasksieve.verifiers.families.probes import Differ
from tasksieve.verifiers.registry import get_differ
from tasksieve.verifiers.reliability import (
    AmbiguityConfig,
    AmbiguityReport,
    StrengthConfig,
    StrengthReport,
    ambiguity_evidence,
    strength_evidence,
)

log = logging.getLogger("tasksieve.reliability")


def strength_check(report: StrengthReport) -> StrengthCheck:
    """The kept-task column for a strength report."""
    return StrengthCheck(
        made=report.made,
        killed=report.killed,
        survived=report.survived,
        equivalent=report.equivalent,
        undecided=report.infra_errors,
        unprobed=report.unprobed,
        score=report.score,
        probes=report.probes,
        duration_s=round(report.duration_s, 4),
        survivors=[
            SurvivingMutant(
                operator=s.operator,
                where=s.where,
                diff=s.diff,
                probe=s.probe,
                reference_output=s.reference_output,
                mutant_output=s.mutant_output,
            )
            for s in report.survivors
        ],
    )


def ambiguity_check(report: AmbiguityReport, cfg: AmbiguityConfig) -> AmbiguityCheck:
    """The kept-task column for an ambiguity report."""
    return AmbiguityCheck(
        probes_tried=report.tried,
        probes_valid=report.valid,
        probes_agreed=report.agreed,
        solutions=report.solutions,
        duration_s=round(report.duration_s, 4),
        outcome=report.outcome(cfg),
        distinct=report.distinct,
        probes_dropped=report.dropped,
    )


def _differ(family: str, snapshot_store: str | None = None) -> Differ | None:
    try:
        return get_differ(family, snapshot_store)
    except (UnsupportedFamily, ImportError):
        return None


class _DifferFn(SandboxDoFn, CachedStage):
    """A sandbox DoFn that measures with the family's differ (``None``: pass unmeasured);
    with a rollout cache directory, outcomes are looked up by content (``cached``)."""

    def __init__(self, sandbox: SandboxConfig, run_id: str, cache_dir: str | None) -> None:
        super().__init__(sandbox, run_id)
        self.init_cache(cache_dir, sandbox)

    def finish_bundle(self) -> None:
        self.flush_cache()

    def setup(self) -> None:
        super().setup()
        self.setup_cache()
        # A remote sandbox verifies whole solutions in the service and runs nothing here.
        self.remote = self.sandbox.capabilities.whole_verifications
        if self.remote:
            log.warning(
                "%s: the sandbox service does not observe probes yet; with --sandbox remote "
                "tasks pass this stage unmeasured",
                type(self).__name__,
            )

    def differ(self, family: str, stage: str) -> Differ | None:
        """The family's differ, or None (counted) when this stage cannot measure the task."""
        self.count_sandbox()  # what this worker's runs really got
        if self.remote:
            count(f"{stage}.remote")
            return None
        found = _differ(family, self.sandbox_cfg.snapshot_store)
        if found is None:
            count(f"{stage}.unsupported")
        return found


class TestStrengthFn(_DifferFn):
    """Measure each task's test strength; reject weak tests with the survivors as evidence."""

    __test__ = False  # not a pytest class

    def __init__(
        self, cfg: StrengthConfig, sandbox: SandboxConfig, run_id: str, cache_dir: str | None = None
    ) -> None:
        super().__init__(sandbox, run_id, cache_dir)
        self.cfg = cfg

    def process(self, item: Item) -> Iterator[Any]:
        differ = self.differ(item.task.family, "strength")
        if differ is None:
            yield item
            return
        verifier = self.verifiers.get(item.task.family)
        if item.reference_s:
            verifier.calibrate(item.task, item.reference_s)
        report = cached.strength(
            self.detector_cache, item.task, verifier, differ, self.sandbox, self.cfg
        )
        _count_strength(report)
        log.info("test strength %s: %s", item.id, report.summary())
        if report.made and report.infra_errors == report.made:
            cause = report.infra_error or report.summary()
            why = f"test strength: every mutant hit an infra error; {cause}"
            yield rejected(self._reject(item, "gate.infra_error", why))
            return
        if report.weak(self.cfg):
            why = strength_evidence(report, self.cfg)
            yield rejected(self._reject(item, "gate.weak_tests", why))
            return
        yield replace(item, strength=strength_check(report))

    def _reject(self, item: Item, reason: str, detail: str) -> dict[str, Any]:
        count("strength.rejected")  # measured and rejected: the progress display counts it once
        return rejection(
            stage="test_strength", reason=reason, detail=detail, run_id=self.run_id, item=item
        )


def _count_strength(report: StrengthReport) -> None:
    count("strength.tasks")
    count("strength.mutants", report.made)
    count("strength.killed", report.killed)
    count("strength.survived", report.survived)
    count("strength.equivalent", report.equivalent)
    count("strength.undecided", report.infra_errors)
    count("strength.unprobed", report.unprobed)
    count("strength.ms", int(report.duration_s * 1000))


class TestStrength(beam.PTransform):
    """Reject tasks whose tests let mutants of the reference through (``gate.weak_tests``)."""

    __test__ = False  # not a pytest class

    def __init__(
        self, cfg: StrengthConfig, sandbox: SandboxConfig, run_id: str, cache_dir: str | None = None
    ) -> None:
        super().__init__()
        self.cfg = cfg
        self.sandbox = sandbox
        self.run_id = run_id
        self.cache_dir = cache_dir

    @no_annotations
    def expand(self, items: beam.PCollection) -> dict[str, beam.PCollection]:
        measure = beam.ParDo(TestStrengthFn(self.cfg, self.sandbox, self.run_id, self.cache_dir))
        return items | "Measure" >> Guarded(measure, "test_strength", self.run_id)


class AmbiguityFn(_DifferFn):
    """Compare passing samples with the reference on extra inputs; reject ambiguous tasks."""

    def __init__(
        self,
        cfg: AmbiguityConfig,
        sandbox: SandboxConfig,
        run_id: str,
        cache_dir: str | None = None,
    ) -> None:
        super().__init__(sandbox, run_id, cache_dir)
        self.cfg = cfg

    def process(self, s: Scored) -> Iterator[Any]:
        task = s.item.task
        differ = self.differ(task.family, "ambiguity")
        if differ is None:
            yield s
            return
        report = cached.ambiguity(
            self.detector_cache, task, s.passing, differ, self.sandbox, self.cfg
        )
        count("ambiguity.tasks")
        count("ambiguity.probes", report.tried)
        count("ambiguity.disagreements", len(report.disagreements))
        count("ambiguity.dropped", report.dropped)
        count("ambiguity.ms", int(report.duration_s * 1000))
        if report.outcome(self.cfg) == "not_enough_evidence":
            count("ambiguity.not_enough_evidence")
        log.info("ambiguity %s: %s", task.id, report.summary())
        if report.infra_error:
            why = f"ambiguity check: observing the samples failed: {report.infra_error}"
            yield rejected(self._reject(s, "verify.infra_error", why))
            return
        if report.ambiguous(self.cfg):
            why = ambiguity_evidence(report, self.cfg)
            yield rejected(self._reject(s, "filter.ambiguous", why))
            return
        yield replace(s, ambiguity=ambiguity_check(report, self.cfg))

    def _reject(self, s: Scored, reason: str, detail: str) -> dict[str, Any]:
        count("ambiguity.rejected")  # measured and rejected: the progress display counts it once
        return rejection(
            stage="ambiguity",
            reason=reason,
            detail=detail,
            run_id=self.run_id,
            item=s.item,
            n=s.n,
            k=s.k,
            n_requested=s.requested,
            pass_rate=s.k / s.n,
        )


class Ambiguity(beam.PTransform):
    """Reject tasks whose passing samples disagree with the reference (``filter.ambiguous``)."""

    def __init__(
        self,
        cfg: AmbiguityConfig,
        sandbox: SandboxConfig,
        run_id: str,
        cache_dir: str | None = None,
    ) -> None:
        super().__init__()
        self.cfg = cfg
        self.sandbox = sandbox
        self.run_id = run_id
        self.cache_dir = cache_dir

    @no_annotations
    def expand(self, scored: beam.PCollection) -> dict[str, beam.PCollection]:
        compare = beam.ParDo(AmbiguityFn(self.cfg, self.sandbox, self.run_id, self.cache_dir))
        return scored | "Compare" >> Guarded(compare, "ambiguity", self.run_id)
