"""Adaptive rollouts: sample and verify in rounds, and let a task go once its label is settled.

The rounds are unrolled in the Beam graph (``transforms.algorithms.adaptive_stopping.schedule``):
round r asks the
sampler for samples ``first .. first + count - 1`` of every task still open (one RunInference
stage, so the model batches across tasks), verifies them, and either settles a task (a
``Scored``) or hands it to round r + 1. A task records ``n_requested``: the samples its rounds
asked for (up to ``max_samples``), and ``n``: those verified, so ``n < n_requested`` still
means a shortfall or lost samples, as in a fixed-K run; ``max_samples - n_requested`` is what
stopping early saved. A
round's config is the run's ``SamplerConfig`` with ``first_sample`` and ``samples`` set to
the round's range; samplers seed sample j by its index, so sample j is the same completion
(transformers, replay) whether drawn adaptively or in one fixed-K request (openai: see
``tasksieve.transforms.samplers.openai_sampler``).

What stops a task: ``transforms.algorithms.adaptive_stopping.settled_label`` on its verified
samples; the last
round; or a round that came back short (a replay file with fewer rows: the task is scored on
what it got, as a fixed-K run would, and counted in ``rollouts.short_samples`` and
``rollouts.samples_missing`` = max_samples - drawn). Samples lost to infra
errors leave n as in ``transforms.rollouts.rounds``: the task may still settle on the others, and at
the end ``transforms.algorithms.settle.band_settled`` decides whether it is scored or rejected as
``verify.infra_error``. A sampler error in any round rejects the task
(``rollouts.sampler_error``), as it would in a fixed-K run: each round is a
``transforms.rollouts.rollout_round.RolloutRound`` (the sampler guard and the rollout cache).
A round step that raises on a task rejects it as ``rollouts.error`` or ``verify.error``
(``transforms.runtime.deadletter``). With a cache directory, sample i has the same cache key
whichever
round (or fixed-K run) drew it, so a re-run with another band or round size reuses it.

Counters: ``adaptive.samples_drawn``, ``adaptive.samples_saved`` (max_samples - drawn, summed
over the tasks scored that were not short), ``adaptive.stopped_early`` and
``adaptive.stopped_round_R``.
It does NOT share one loaded model between the round stages: each RunInference stage loads
its own (cheap for the bundled model and replay; a large local model is loaded once a round),
and with a cache directory each round stage loads the cached samples once per worker.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import apache_beam as beam
from apache_beam.typehints.decorators import no_annotations

from tasksieve.schemas import Verdict
from tasksieve.transforms.algorithms.adaptive_stopping import (
    AdaptiveConfig,
    schedule,
    settled_label,
)
from tasksieve.transforms.algorithms.settle import band_settled
from tasksieve.transforms.algorithms.stats import BandConfig
from tasksieve.transforms.rollouts.rollout_round import RolloutRound, task_request
from tasksieve.transforms.rollouts.rounds import ROLLOUTS, VerifySamplesFn
from tasksieve.transforms.runtime.common import REJECTED, count, rejected
from tasksieve.transforms.runtime.deadletter import merge_rejected
from tasksieve.transforms.runtime.items import Item, Scored, rejection
from tasksieve.transforms.samplers import SamplerConfig, SampleRequest, Samples
from tasksieve.verifiers import SandboxConfig
from tasksieve.verifiers.retry import RetryPolicy

log = logging.getLogger("tasksieve.adaptive")
NEXT = "next"


@dataclass
class Progress:
    """What a task's rounds so far have found."""

    asked: int = 0
    """Samples the rounds asked the sampler for (recorded as the task's ``n_requested``)."""
    drawn: int = 0
    """Samples the sampler returned (verified or lost to infra errors)."""
    k: int = 0
    scored: int = 0
    lost: int = 0
    lost_detail: str = ""
    rounds: int = 0
    short: bool = False
    """A round came back with fewer samples than asked (the sampler has no more)."""
    model_id: str = ""
    passing: list[tuple[int, str]] = field(default_factory=list)


def round_config(cfg: SamplerConfig, first: int, count: int) -> SamplerConfig:
    """The sampler config of the round that draws samples ``first .. first + count - 1``."""
    return dataclasses.replace(cfg, first_sample=first, samples=count)


def remaining_after(p: Progress, asked: int, got: int, cfg: AdaptiveConfig) -> int:
    """Samples a task may still draw after this round: none once the budget is spent or a
    round came back short (the sampler has no more), else ``max_samples - drawn``."""
    if got < asked:
        return 0
    return max(0, cfg.max_samples - p.drawn)


class RoundVerifyFn(VerifySamplesFn):
    """Verify one round's samples of a task; emit it Scored, rejected, or to the next round.

    The verification itself is ``transforms.rollouts.rounds.VerifySamplesFn``'s (same sandbox,
    retries, rollout rows); this DoFn keeps the task's running count between rounds.
    """

    def __init__(
        self,
        sandbox: SandboxConfig,
        run_id: str,
        band: BandConfig,
        retry: RetryPolicy | None,
        adaptive: AdaptiveConfig,
        round_no: int,
        cache_dir: str | None = None,
    ) -> None:
        super().__init__(sandbox, run_id, band, retry, cache_dir)
        self.adaptive = adaptive
        self.round_no = round_no

    def process(self, element: tuple[Item, Progress, Samples]) -> Iterator[Any]:
        item, before, samples = element
        progress = dataclasses.replace(before, passing=list(before.passing))  # inputs stay as-is
        asked, got = samples.requested, len(samples.completions)
        progress.asked += asked
        if progress.drawn and not got and samples.error is None:
            pass  # the sampler ran out after earlier rounds: score what there is
        else:
            whole = dataclasses.replace(samples, requested=progress.asked)
            refused = self.refuse(item, whole, n=progress.scored)
            if refused is not None:
                yield rejected(refused)
                return
            first = progress.drawn
            solutions, verdicts, rows = self.verify_samples(item, samples, first)
            for row in rows:
                yield beam.pvalue.TaggedOutput(ROLLOUTS, row)
            self._add(progress, samples, solutions, verdicts)
        count("adaptive.samples_drawn", got)
        if got < asked:
            self._short(item, progress, samples)
        remaining = remaining_after(progress, asked, got, self.adaptive)
        if remaining:
            label = settled_label(progress.k, progress.scored, self.band, self.adaptive, remaining)
            if label is None:
                yield beam.pvalue.TaggedOutput(NEXT, (item, progress))
                return
            count("adaptive.stopped_early")
        yield from self._finish(item, progress)

    def _short(self, item: Item, p: Progress, samples: Samples) -> None:
        """Count a round that came back short as a fixed-K run would count the task."""
        p.short = True
        missing = self.adaptive.max_samples - p.drawn
        count("rollouts.samples_missing", missing)
        count("rollouts.short_samples")
        log.warning(
            "%s: sampler %s returned %d of %d samples in round %d; scoring on %d",
            item.id,
            samples.sampler,
            len(samples.completions),
            samples.requested,
            self.round_no,
            p.drawn,
        )

    def _add(
        self, p: Progress, samples: Samples, solutions: list[str], verdicts: list[Verdict]
    ) -> None:
        first = p.drawn
        for i, (sol, v) in enumerate(zip(solutions, verdicts, strict=True)):
            if v.status == "infra_error":
                p.lost += 1
                p.lost_detail = p.lost_detail or v.detail[:300]
                continue
            p.scored += 1
            if v.passed:
                p.k += 1
                p.passing.append((first + i, sol))
        lost_now = sum(v.status == "infra_error" for v in verdicts)
        if lost_now:
            count("verify.samples_left_out", lost_now)
        p.drawn += len(verdicts)
        p.rounds += 1
        p.model_id = p.model_id or samples.model_id

    def _finish(self, item: Item, p: Progress) -> Iterator[Any]:
        top = self.adaptive.max_samples
        count(f"adaptive.stopped_round_{self.round_no}")
        settled, why = band_settled(p.k, p.scored, p.lost, self.band)
        if not settled:
            yield rejected(
                rejection(
                    stage="verify",
                    reason="verify.infra_error",
                    detail=f"{p.lost} of {p.drawn} samples hit an infra error after "
                    f"{self.retry.attempts} attempts ({p.lost_detail}); {why}",
                    run_id=self.run_id,
                    item=item,
                    n=p.scored,
                    k=p.k,
                    n_requested=p.asked,
                )
            )
            return
        if not p.short:  # what a short sampler did not have is missing, not saved
            count("adaptive.samples_saved", top - p.drawn)
        log.info(
            "verified %s: %d/%d samples pass after %d round(s) of at most %d samples",
            item.id,
            p.k,
            p.scored,
            p.rounds,
            top,
        )
        yield Scored(item, p.scored, p.k, p.model_id, p.asked, p.passing)


def _join(pending: tuple[Item, Progress], answers: list[Samples], asked: int) -> Any:
    item, progress = pending
    samples = answers[0] if answers else Samples(item.id, [], "", "none", asked)
    return item, progress, samples


def _request(pending: tuple[Item, Progress]) -> list[tuple[str, SampleRequest]]:
    return task_request(pending[0])


def _task_id(pending: tuple[Item, Progress]) -> str:
    return pending[0].id


class AdaptiveRollouts(beam.PTransform):
    """Rollouts and Verify in rounds: outputs ``ok`` (Scored), ``rollouts`` and ``rejected``."""

    def __init__(
        self,
        sampler: SamplerConfig,
        adaptive: AdaptiveConfig,
        sandbox: SandboxConfig,
        run_id: str,
        band: BandConfig,
        retry: RetryPolicy | None = None,
        cache_dir: str | None = None,
    ) -> None:
        super().__init__()
        if adaptive.max_samples != sampler.samples:
            raise ValueError(
                f"adaptive max_samples ({adaptive.max_samples}) must equal the sampler's "
                f"samples ({sampler.samples}): --samples is the maximum with --adaptive"
            )
        self.sampler = sampler
        self.adaptive = adaptive
        self.sandbox = sandbox
        self.run_id = run_id
        self.band = band
        self.retry = retry
        self.cache_dir = (
            cache_dir  # the rollout cache (tasksieve.transforms.rollouts.cache); None: off
        )

    @no_annotations
    def expand(self, items: beam.PCollection) -> dict[str, Any]:
        pending = items | "Start" >> beam.Map(lambda it: (it, Progress()))
        scored, rollouts, rejects = [], [], []
        for r, (first, count_) in enumerate(schedule(self.adaptive), start=1):
            out = pending | f"Round{r}" >> RolloutRound(
                round_config(self.sampler, first, count_),
                self.run_id,
                requests=_request,
                key=_task_id,
                pair=functools.partial(_join, asked=count_),
                verify=RoundVerifyFn(
                    self.sandbox,
                    self.run_id,
                    self.band,
                    self.retry,
                    self.adaptive,
                    r,
                    self.cache_dir,
                ),
                tags=[ROLLOUTS, NEXT],
                cache_dir=self.cache_dir,
            )
            scored.append(out["ok"])
            rollouts.append(out[ROLLOUTS])
            rejects.append(out[REJECTED])
            pending = out[NEXT]
        # the last round settles every task it sees, so nothing is left in ``pending``
        return {
            "ok": scored | "Scored" >> beam.Flatten(),
            ROLLOUTS: rollouts | "Rollouts" >> beam.Flatten(),
            REJECTED: merge_rejected(*rejects),
        }
