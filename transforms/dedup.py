"""ExactDedup and NearDedup: drop repeated prompts, keeping the earliest record of each group."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import apache_beam as beam

from schemas import Finding
from transforms.common import REJECTED, count, rejected
from transforms.items import Item, rejection, sha256_text
from transforms.textsim import DocShingles, near_duplicates, normalize_text, shingles


@dataclass(frozen=True)
class DedupConfig:
    """Near-dup threshold (Jaccard of word shingles) and MinHash size."""

    near_threshold: float = 0.8
    shingle_size: int = 3
    num_perm: int = 128
    enabled: bool = True

    def __post_init__(self) -> None:
        if not 0.0 < self.near_threshold <= 1.0:
            raise ValueError(f"need 0 < near_threshold <= 1, got {self.near_threshold}")
        if self.shingle_size < 1:
            raise ValueError(f"need shingle_size >= 1, got {self.shingle_size}")
        if self.num_perm < 16:
            raise ValueError(f"need num_perm >= 16, got {self.num_perm}")


def prompt_key(item: Item) -> str:
    """Hash of the normalised prompt (case, punctuation and whitespace folded)."""
    return sha256_text(f"{item.task.family}\0{normalize_text(item.task.prompt)}")


class KeepFirstFn(beam.DoFn):
    """Of a group with the same prompt key, keep the earliest; reject the rest."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id

    def process(self, kv: tuple[str, Iterable[Item]]) -> Iterator[Any]:
        items = sorted(kv[1], key=lambda it: it.order_key)
        first = items[0]
        found = [Finding(kind="exact_dup", other_id=it.id, method="sha256") for it in items[1:]]
        for it in items[1:]:
            yield rejected(
                rejection(
                    stage="exact_dedup",
                    reason="dedup.exact",
                    detail=f"same normalised prompt as {first.id} "
                    f"({first.source_file}:{first.source_line})",
                    run_id=self.run_id,
                    item=it,
                )
            )
        count("exact_dedup.kept")
        yield replace(first, findings=[*first.findings, *found])


class ExactDedup(beam.PTransform):
    """Group by normalised-prompt hash; the earliest record of a group survives."""

    def __init__(self, run_id: str) -> None:
        super().__init__()
        self.run_id = run_id

    def expand(self, items: beam.PCollection) -> dict[str, beam.PCollection]:
        out = (
            items
            | "KeyByPrompt" >> beam.Map(lambda it: (prompt_key(it), it))
            | "Group" >> beam.GroupByKey()
            | "KeepFirst" >> beam.ParDo(KeepFirstFn(self.run_id)).with_outputs(REJECTED, main="ok")
        )
        return {"ok": out.ok, REJECTED: out[REJECTED]}


def _doc(item: Item, size: int) -> DocShingles:
    return DocShingles(item.id, item.order_key, shingles(item.task.prompt, size))


class DropNearFn(beam.DoFn):
    """Reject items the global near-dup pass marked, naming the survivor and the score."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id

    def process(self, item: Item, dropped: dict[str, tuple[str, float]]) -> Iterator[Any]:
        if item.id in dropped:
            other, score = dropped[item.id]
            yield rejected(
                rejection(
                    stage="near_dedup",
                    reason="dedup.near",
                    detail=f"near-duplicate of {other} (Jaccard {score:.3f})",
                    run_id=self.run_id,
                    item=item,
                )
            )
            return
        found = [
            Finding(kind="near_dup", other_id=drop_id, method="minhash", score=score)
            for drop_id, (other, score) in sorted(dropped.items())
            if other == item.id
        ]
        count("near_dedup.kept")
        yield replace(item, findings=[*item.findings, *found]) if found else item


class NearDedup(beam.PTransform):
    """MinHash LSH near-duplicate removal over the candidates.

    First form: shingles of every candidate meet on one worker, which limits it to what one
    machine holds (a distributed band-key version replaces this).
    """

    def __init__(self, cfg: DedupConfig, run_id: str) -> None:
        super().__init__()
        self.cfg = cfg
        self.run_id = run_id

    def expand(self, items: beam.PCollection) -> dict[str, beam.PCollection]:
        cfg = self.cfg
        docs = items | "Shingle" >> beam.Map(_doc, cfg.shingle_size)
        dropped = (
            docs
            | "Collect" >> beam.combiners.ToList()
            | "Cluster"
            >> beam.Map(
                lambda ds: (
                    near_duplicates(ds, cfg.near_threshold, cfg.num_perm) if cfg.enabled else {}
                )
            )
        )
        out = items | "Drop" >> beam.ParDo(
            DropNearFn(self.run_id), beam.pvalue.AsSingleton(dropped)
        ).with_outputs(REJECTED, main="ok")
        return {"ok": out.ok, REJECTED: out[REJECTED]}
