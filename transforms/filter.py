"""PassRate and Filter: k of n with a Wilson interval, then the difficulty band.

n is the number of samples actually obtained and verified, which can be fewer than the K
asked (a replay file with fewer rows for the task): such a task is scored on its real n
(the Wilson interval widens accordingly) and kept or filtered like any other; its row
records both (``n``, ``n_requested``). A task with no sample at all never gets here
(rejected as ``rollouts.no_samples``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import apache_beam as beam
from apache_beam.typehints.decorators import no_annotations

from tasksieve.schemas import CuratedTask, Lineage
from tasksieve.transforms.algorithms.stats import BandConfig, Difficulty, wilson_interval
from tasksieve.transforms.runtime.common import count, rejected
from tasksieve.transforms.runtime.deadletter import Guarded
from tasksieve.transforms.runtime.items import Scored, canonical_json, rejection


def curated_row(s: Scored, run_id: str, fingerprint: str, difficulty: Difficulty) -> dict[str, Any]:
    """The kept-task row for the tasks/ shards."""
    task = s.item.task
    lo, hi = wilson_interval(s.k, s.n)
    row = CuratedTask(
        id=task.id,
        family=task.family,
        prompt=task.prompt,
        verifier=canonical_json(task.verifier.model_dump(mode="json")),
        reference_solution=task.reference_solution,
        source_dataset=task.source.dataset,
        source_license=task.source.license,
        source_url=task.source.url,
        source_author=task.source.author,
        tags=list(task.tags),
        metadata=canonical_json(task.metadata),
        reward=canonical_json(task.reward.model_dump(mode="json")),
        feedback=task.feedback,
        n=s.n,
        k=s.k,
        n_requested=s.requested,
        pass_rate=s.k / s.n,
        pass_rate_by_turn=None if s.k_by_turn is None else [k / s.n for k in s.k_by_turn],
        k_by_turn=s.k_by_turn,
        episode_steps=s.episode_steps,
        ci_low=lo,
        ci_high=hi,
        difficulty=difficulty,
        gates=s.item.gates,
        findings=s.item.findings,
        test_strength=s.item.strength,
        ambiguity=s.ambiguity,
        lineage=Lineage(
            source_file=s.item.source_file,
            source_line=s.item.source_line,
            input_sha256=s.item.input_sha256,
            run_id=run_id,
            config_fingerprint=fingerprint,
        ),
    )
    return row.model_dump()


class FilterFn(beam.DoFn):
    """Keep tasks inside the band; reject too_easy / too_hard with their pass rate."""

    def __init__(self, band: BandConfig, run_id: str, fingerprint: str) -> None:
        self.band = band
        self.run_id = run_id
        self.fingerprint = fingerprint

    def process(self, s: Scored) -> Iterator[Any]:
        rate = s.k / s.n
        difficulty = self.band.classify(rate)
        if difficulty != "keep":
            lo, hi = wilson_interval(s.k, s.n)
            yield rejected(
                rejection(
                    stage="filter",
                    reason=f"filter.{difficulty}",
                    detail=f"pass rate {s.k}/{s.n} = {rate:.3f} (95% CI {lo:.2f}-{hi:.2f}); "
                    f"band keeps {self.band.too_hard} < rate < {self.band.too_easy}",
                    run_id=self.run_id,
                    item=s.item,
                    n=s.n,
                    k=s.k,
                    n_requested=s.requested,
                    pass_rate=rate,
                )
            )
            return
        count("filter.kept")
        yield curated_row(s, self.run_id, self.fingerprint, difficulty)


class Filter(beam.PTransform):
    """Apply the pass-rate band; main output is curated-task rows."""

    def __init__(self, band: BandConfig, run_id: str, fingerprint: str) -> None:
        super().__init__()
        self.band = band
        self.run_id = run_id
        self.fingerprint = fingerprint

    @no_annotations
    def expand(self, scored: beam.PCollection) -> dict[str, beam.PCollection]:
        band = beam.ParDo(FilterFn(self.band, self.run_id, self.fingerprint))
        return scored | "Band" >> Guarded(band, "filter", self.run_id)
