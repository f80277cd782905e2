"""Rollouts and Verify: K samples per task from a Sampler, each executed by the verifier.

A sampler may return fewer than K completions for a task (a replay file with fewer rows).
That is not an error: the task is verified and scored on the n it got, its Scored (and so
its kept or filtered row) records n and the K asked, and the counters
``rollouts.short_samples`` (tasks with 0 < n < K) and ``rollouts.samples_missing`` (K - n
summed over all tasks) make the shortfall visible. A task with no completion at all is
rejected as ``rollouts.no_samples``.

A verification that hits ``infra_error`` is retried (``tasksieve.verifiers.retry``; counters
``verify.retries``, ``verify.retry_recovered``, ``verify.retry_exhausted``). A sample still
failing after its retries is left out of n (``verify.samples_left_out``; its rollout row keeps
the infra verdict) and the task is scored on the rest, unless those cannot settle its band
(``transforms.algorithms.settle``): then it is rejected as ``verify.infra_error`` with the evidence.

``Rollouts`` is one ``transforms.rollouts.rollout_round.RolloutRound`` (the round every path is
built of) without its verify step. A sampler that raises fails only the tasks it raised on
(``transforms.rollouts.guard``, applied by the round's ``Sample``): they are rejected as
``rollouts.sampler_error`` with the exception. Any other step that raises on a task rejects it
as ``rollouts.error`` or ``verify.error`` (``transforms.runtime.deadletter``).

With a rollout cache directory (``tasksieve.transforms.rollouts.cache``) the sampler is wrapped so
cached completions are served without sampling, and cached verdicts without verifying.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterator
from typing import Any

import apache_beam as beam
from apache_beam.typehints.decorators import no_annotations

from tasksieve.schemas import Rollout, TaskRecord, Verdict
from tasksieve.transforms.algorithms.settle import band_settled
from tasksieve.transforms.algorithms.stats import BandConfig
from tasksieve.transforms.reliability.gates import count_retry
from tasksieve.transforms.rollouts.cache.verdicts import VerdictCache
from tasksieve.transforms.rollouts.rollout_round import RolloutRound, sample_request, task_request
from tasksieve.transforms.runtime.common import count, rejected
from tasksieve.transforms.runtime.deadletter import Guarded
from tasksieve.transforms.runtime.items import Item, Scored, rejection
from tasksieve.transforms.runtime.worker_sandbox import SandboxDoFn
from tasksieve.transforms.samplers import SamplerConfig, Samples, extract_solution
from tasksieve.verifiers import SandboxConfig, Verifier
from tasksieve.verifiers.families.batch import PART_MIN, verify_batch
from tasksieve.verifiers.retry import RetryOutcome, RetryPolicy
from tasksieve.verifiers.rewards import Reward, reward

log = logging.getLogger("tasksieve.rollouts")
ROLLOUTS = "rollouts"


class Rollouts(RolloutRound):
    """Ask the sampler for K completions per task; join them back to their task.

    One ``RolloutRound`` without its verify step. Returns ``ok`` ((Item, Samples) pairs) and
    ``rejected``. A task the sampler failed on gets error Samples
    (``tasksieve.transforms.rollouts.guard``), rejected by Verify as
    ``rollouts.sampler_error``; a failure pairing a task with its samples is
    ``rollouts.error``.
    """

    def __init__(self, cfg: SamplerConfig, run_id: str, cache_dir: str | None = None) -> None:
        super().__init__(
            cfg,
            run_id,
            requests=task_request,
            key=_item_id,
            pair=functools.partial(_pair, requested=cfg.samples),
            answer=_sampled,
            cache_dir=cache_dir,
        )
        self.cfg = cfg


def _item_id(item: Item) -> str:
    return item.id


def _sampled(kv: tuple[str, Samples]) -> tuple[str, Samples]:
    count("rollouts.sampled")
    log.info("sampled %s: %d completions", kv[0], len(kv[1].completions))
    return kv


def _pair(item: Item, answers: list[Samples], requested: int) -> tuple[Item, Samples]:
    # the sampler dropped the task: Verify rejects it as rollouts.no_samples
    samples = answers[0] if answers else Samples(item.id, [], "", "none", requested)
    count_shortfall(samples)
    return item, samples


def count_shortfall(samples: Samples) -> None:
    """Count (and log) a task that got fewer completions than asked."""
    missing = samples.shortfall
    if not missing:
        return
    count("rollouts.samples_missing", missing)
    if samples.completions:
        count("rollouts.short_samples")
        log.warning(
            "%s: sampler %s returned %d of %d samples; scoring on %d",
            samples.task_id,
            samples.sampler,
            len(samples.completions),
            samples.requested,
            len(samples.completions),
        )


def rollout_row(
    item: Item,
    samples: Samples,
    index: int,
    completion: str,
    solution: str,
    verdict: Verdict,
    run_id: str,
    columns: dict[str, Any],
    feedback: str | None = None,
) -> dict[str, Any]:
    """One rollout row: the sample, its verdict and the reward it earned (null on infra_error).

    ``columns`` are the sampler's per-sample columns (``Samples.columns``; a later turn sets
    its ``turn`` there); ``feedback`` is what the model was told before this attempt."""
    task = item.task
    earned = reward(verdict, task.reward, item.reference_s)
    row = Rollout(
        task_id=task.id,
        family=task.family,
        sample_index=index,
        model_id=samples.model_id,
        sampler=samples.sampler,
        completion=completion,
        solution=solution,
        verdict=verdict,
        run_id=run_id,
        reward=earned.value if isinstance(earned, Reward) else None,
        reward_components=earned.components if isinstance(earned, Reward) else None,
        feedback=feedback,
        **columns,
    )
    return row.model_dump()


class VerifySamplesFn(SandboxDoFn):
    """The verification every rollout path shares; its subclasses only ``process``.

    ``refuse`` rejects what cannot be verified, ``verify_samples`` verifies completions on the
    worker's shared pool with retries (cached verdicts from the rollout cache) and builds the
    rollout rows. ``VerifyFn`` (one-shot), ``adaptive.RoundVerifyFn`` and
    ``multi_turn.TurnFn`` differ only in what they do with the verdicts.
    """

    def __init__(
        self,
        sandbox: SandboxConfig,
        run_id: str,
        band: BandConfig | None = None,
        retry: RetryPolicy | None = None,
        cache_dir: str | None = None,
    ) -> None:
        super().__init__(sandbox, run_id)
        self.band = band or BandConfig()
        self.retry = retry or RetryPolicy()
        self.cache = VerdictCache(cache_dir, sandbox) if cache_dir else None

    def setup(self) -> None:
        super().setup()
        if self.cache is not None:
            self.cache.setup()

    def finish_bundle(self) -> None:
        if self.cache is not None:
            self.cache.flush()  # this bundle's verdicts, before the next can crash

    def refuse(self, item: Item, samples: Samples, n: int = 0) -> dict[str, Any] | None:
        """The rejection of a task whose samples cannot be verified (the sampler failed it,
        returned nothing, or no verifier takes its family), else None. ``n``: samples
        already verified (adaptive rounds)."""
        if samples.error is not None:  # the sampler failed the task for good
            return rejection(
                stage="rollouts",
                reason="rollouts.sampler_error",
                detail=samples.error,
                run_id=self.run_id,
                item=item,
                n=n,
                n_requested=samples.requested,
            )
        if not samples.completions:
            return rejection(
                stage="rollouts",
                reason="rollouts.no_samples",
                detail=f"sampler {samples.sampler} returned no completion "
                f"of {samples.requested} asked",
                run_id=self.run_id,
                item=item,
                n=n,
                n_requested=samples.requested,
            )
        found = self.verifier_for(item, "verify")  # gates reject these first; kept for safety
        return found if isinstance(found, dict) else None

    def verify_solutions(
        self, task: TaskRecord, verifier: Verifier, solutions: list[str]
    ) -> list[RetryOutcome]:
        """Each solution's verdict (with retries) on the shared pool, cached ones from the
        rollout cache."""

        def run(sols: list[str]) -> list[RetryOutcome]:
            # The code family judges a part in one sandbox entry: parts of at least
            # PART_MIN samples, at most one per pool thread (other tasks' bundles share it).
            # Other families verify each sample on its own, all of them at once as before.
            workers = getattr(self.pool, "_max_workers", 1)
            parts = len(sols)
            if hasattr(verifier, "verify_many"):
                parts = min(workers, -(-len(sols) // PART_MIN))
            return verify_batch(verifier, task, sols, self.retry, self.pool, parts)

        return run(solutions) if self.cache is None else self.cache.verify(task, solutions, run)

    def verify_samples(
        self, item: Item, samples: Samples, first: int = 0
    ) -> tuple[list[str], list[Verdict], list[dict[str, Any]]]:
        """Verify every completion (with retries): the solutions, verdicts and rollout rows,
        rows numbered from sample index ``first``."""
        self.count_sandbox()  # what this worker's runs really got
        task = item.task
        verifier = self.verifiers.get(task.family)
        if item.reference_s:
            verifier.calibrate(task, item.reference_s)
        entry = sample_request(item).entry_point
        solutions = [extract_solution(c, task.family, entry) for c in samples.completions]
        tries = self.verify_solutions(task, verifier, solutions)
        verdicts: list[Verdict] = [t.verdict for t in tries]
        for t in tries:
            count_retry("verify", t)
        rows = []
        for i, (comp, sol, verdict) in enumerate(
            zip(samples.completions, solutions, verdicts, strict=True)
        ):
            count(f"verify.{verdict.status}")
            row = rollout_row(
                item, samples, first + i, comp, sol, verdict, self.run_id, samples.columns(i)
            )
            rows.append(row)
        return solutions, verdicts, rows


class VerifyFn(VerifySamplesFn):
    """Verify every sample of a task in the sandbox; emit rollouts and the task's k of n."""

    def process(self, pair: tuple[Item, Samples]) -> Iterator[Any]:
        item, samples = pair
        refused = self.refuse(item, samples)
        if refused is not None:
            yield rejected(refused)
            return
        solutions, verdicts, rows = self.verify_samples(item, samples)
        for row in rows:
            yield beam.pvalue.TaggedOutput(ROLLOUTS, row)
        infra = [v for v in verdicts if v.status == "infra_error"]
        task = item.task
        scored = [v for v in verdicts if v.status != "infra_error"]
        k = sum(v.passed for v in scored)
        settled, why = band_settled(k, len(scored), len(infra), self.band)
        if infra:
            count("verify.samples_left_out", len(infra))
            log.warning("%s: %d samples lost to infra errors; %s", task.id, len(infra), why)
        if not settled:
            yield rejected(
                rejection(
                    stage="verify",
                    reason="verify.infra_error",
                    detail=f"{len(infra)} of {len(verdicts)} samples hit an infra error after "
                    f"{self.retry.attempts} attempts ({infra[0].detail[:300]}); {why}",
                    run_id=self.run_id,
                    item=item,
                    n=len(scored),
                    k=k,
                    n_requested=samples.requested,
                )
            )
            return
        log.info("verified %s: %d/%d samples pass", task.id, k, len(scored))
        pairs = enumerate(zip(solutions, verdicts, strict=True))
        passing = [(i, sol) for i, (sol, v) in pairs if v.passed]
        yield Scored(item, len(scored), k, samples.model_id, samples.requested, passing)


class Verify(beam.PTransform):
    """Execute every sample; main output Scored tasks, plus ``rollouts`` and ``rejected``."""

    def __init__(
        self,
        sandbox: SandboxConfig,
        run_id: str,
        band: BandConfig | None = None,
        retry: RetryPolicy | None = None,
        cache_dir: str | None = None,
    ) -> None:
        super().__init__()
        self.sandbox = sandbox
        self.run_id = run_id
        self.band = band
        self.retry = retry
        self.cache_dir = cache_dir

    @no_annotations
    def expand(self, pairs: beam.PCollection) -> dict[str, beam.PCollection]:
        fn = VerifyFn(self.sandbox, self.run_id, self.band, self.retry, self.cache_dir)
        return pairs | "Run" >> Guarded(beam.ParDo(fn), "verify", self.run_id, tags=[ROLLOUTS])
