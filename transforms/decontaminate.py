"""Decontaminate: reject tasks that match a benchmark item (HumanEval bundled, user sets)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import apache_beam as beam

from transforms.benchmarks import BenchmarkIndex, BenchmarkItem, load_benchmark_file, load_humaneval
from transforms.common import REJECTED, count, rejected
from transforms.items import Item, rejection


@dataclass(frozen=True)
class DecontamConfig:
    """Which benchmarks to check against and how similar counts as contaminated."""

    humaneval: bool = True
    benchmark_paths: tuple[str, ...] = ()
    text_field: str = "prompt"
    id_field: str = ""
    threshold: float = 0.5
    ngram: int = 13

    def __post_init__(self) -> None:
        if not 0.0 < self.threshold <= 1.0:
            raise ValueError(f"need 0 < threshold <= 1, got {self.threshold}")
        if self.ngram < 3:
            raise ValueError(f"need ngram >= 3, got {self.ngram}")

    def names(self) -> list[str]:
        return (["humaneval"] if self.humaneval else []) + list(self.benchmark_paths)


def load_items(cfg: DecontamConfig) -> list[BenchmarkItem]:
    items: list[BenchmarkItem] = load_humaneval() if cfg.humaneval else []
    for path in cfg.benchmark_paths:
        items.extend(load_benchmark_file(path, id_field=cfg.id_field, text_field=cfg.text_field))
    return items


class DecontaminateFn(beam.DoFn):
    """Check each task's prompt (and reference solution) against the benchmark index."""

    def __init__(self, cfg: DecontamConfig, run_id: str) -> None:
        self.cfg = cfg
        self.run_id = run_id
        self.index: BenchmarkIndex | None = None

    def setup(self) -> None:
        self.index = BenchmarkIndex(
            load_items(self.cfg), threshold=self.cfg.threshold, ngram=self.cfg.ngram
        )

    def process(self, item: Item) -> Iterator[Any]:
        assert self.index is not None
        findings = self.index.check(item.task.prompt)
        if findings:
            top = findings[0]
            yield rejected(
                rejection(
                    stage="decontaminate",
                    reason=f"decontam.{top.source}",
                    detail=f"matches {top.source} {top.other_id} by {top.method} "
                    f"(score {top.score:.3f})",
                    run_id=self.run_id,
                    item=item,
                )
            )
            return
        count("decontaminate.clean")
        yield item


class Decontaminate(beam.PTransform):
    """Reject tasks contaminated by any configured benchmark, recording method and score."""

    def __init__(self, cfg: DecontamConfig, run_id: str) -> None:
        super().__init__()
        self.cfg = cfg
        self.run_id = run_id

    def expand(self, items: beam.PCollection) -> dict[str, beam.PCollection]:
        out = items | "Check" >> beam.ParDo(DecontaminateFn(self.cfg, self.run_id)).with_outputs(
            REJECTED, main="ok"
        )
        return {"ok": out.ok, REJECTED: out[REJECTED]}
