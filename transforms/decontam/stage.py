"""Decontaminate: reject tasks that match a benchmark item (HumanEval bundled, user sets).

A benchmark is named ``humaneval`` (bundled), a saved index (``tasksieve benchmarks build``),
or a JSONL/JSON/Parquet file or saved ``datasets`` directory read with the field mapping
(``text_field``, ``id_field``). See ``tasksieve.transforms.decontam.sets`` for the methods and
their limits.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import apache_beam as beam
import numpy as np
from apache_beam.typehints.decorators import no_annotations

from tasksieve.transforms.algorithms.textsim import ShingleConfig
from tasksieve.transforms.decontam.sets import (
    ContaminationIndex,
    ContaminationItem,
    IndexSettings,
    is_index_file,
    load_benchmark_file,
    load_humaneval,
    load_index_items,
)
from tasksieve.transforms.runtime import fsio
from tasksieve.transforms.runtime.common import count, rejected
from tasksieve.transforms.runtime.deadletter import Guarded
from tasksieve.transforms.runtime.items import Item, rejection

Loaded = tuple[list[ContaminationItem], list[np.ndarray] | None]


@dataclass(frozen=True)
class DecontamConfig:
    """Which benchmarks to check against and how similar counts as contaminated."""

    humaneval: bool = True
    benchmark_paths: tuple[str, ...] = ()
    text_field: str = "prompt"
    id_field: str = ""
    threshold: float = 0.3
    min_shared: int = 10
    max_df_fraction: float = 0.05
    ngram: int = 13
    min_ngram_words: int = 6
    min_short_words: int = 8
    min_substring_chars: int = 40
    canonical_identifiers: bool = True
    shingle_kind: str = "code"
    shingle_size: int = 4
    min_shared_fraction: float = 0.3
    min_shared_floor: int = 4
    layout_size: int = 3
    name_threshold: float = 0.1
    min_sentence_words: int = 6

    def __post_init__(self) -> None:
        if not 0.0 < self.threshold <= 1.0:
            raise ValueError(f"need 0 < threshold <= 1, got {self.threshold}")
        if self.ngram < 3:
            raise ValueError(f"need ngram >= 3, got {self.ngram}")
        self.settings()

    def names(self) -> list[str]:
        return (["humaneval"] if self.humaneval else []) + list(self.benchmark_paths)

    def settings(self) -> IndexSettings:
        return IndexSettings(
            threshold=self.threshold,
            min_shared=self.min_shared,
            max_df_fraction=self.max_df_fraction,
            ngram=self.ngram,
            min_ngram_words=self.min_ngram_words,
            min_short_words=self.min_short_words,
            min_substring_chars=self.min_substring_chars,
            shingle=ShingleConfig(
                kind=self.shingle_kind,
                size=self.shingle_size,
                canonical_identifiers=self.canonical_identifiers,
            ),
            min_shared_fraction=self.min_shared_fraction,
            min_shared_floor=self.min_shared_floor,
            layout_size=self.layout_size,
            name_threshold=self.name_threshold,
            min_sentence_words=self.min_sentence_words,
        )


def index_parts(path: str) -> list[str]:
    """Saved-index Parquet files at ``path`` (a file or a directory of them), else []."""
    if fsio.is_remote(path):
        files = [path] if path.endswith(".parquet") else fsio.list_children(path, "*.parquet")
    else:
        p = Path(path)
        files = sorted(str(f) for f in p.glob("*.parquet")) if p.is_dir() else [path]
    found = [f for f in files if is_index_file(f)]
    return found if found and len(found) == len(files) else []


def load_source(name_or_path: str, cfg: DecontamConfig) -> list[Loaded]:
    """One benchmark source: bundled name, saved index, or a raw set with the field mapping."""
    if name_or_path.lower() == "humaneval":
        return [(load_humaneval(), None)]
    if not fsio.exists_any(name_or_path):
        raise ValueError(
            f"benchmark {name_or_path!r}: no such file, directory or bundled name "
            "(bundled: humaneval)"
        )
    parts = index_parts(name_or_path)
    if parts:
        return [load_index_items(f, cfg.settings()) for f in parts]
    return [
        (load_benchmark_file(name_or_path, id_field=cfg.id_field, text_field=cfg.text_field), None)
    ]


def build_index(cfg: DecontamConfig) -> ContaminationIndex:
    """The index over every configured benchmark (reusing saved hashes where they match)."""
    loaded: list[Loaded] = []
    for name in cfg.names():
        loaded.extend(load_source(name, cfg))
    items = [it for its, _ in loaded for it in its]
    pre = None
    if loaded and all(p is not None for _, p in loaded):
        pre = [x for _, p in loaded if p is not None for x in p]
    return ContaminationIndex(items, cfg.settings(), precomputed=pre)


def load_items(cfg: DecontamConfig) -> list[ContaminationItem]:
    """Every benchmark item the config names."""
    return [it for name in cfg.names() for its, _ in load_source(name, cfg) for it in its]


class DecontaminateFn(beam.DoFn):
    """Check each task's prompt against the benchmark index (built once per worker)."""

    def __init__(self, cfg: DecontamConfig, run_id: str) -> None:
        self.cfg = cfg
        self.run_id = run_id
        self.index: ContaminationIndex | None = None

    def setup(self) -> None:
        self.index = build_index(self.cfg)

    def process(self, item: Item) -> Iterator[Any]:
        assert self.index is not None
        findings = self.index.check(item.prompt)
        if findings:
            top = findings[0]
            count(f"decontaminate.flagged.{top.method}")
            yield rejected(
                rejection(
                    stage="decontaminate",
                    reason=f"decontam.{top.source}",
                    detail=f"matches {top.source} {top.other_id} by {top.method} "
                    f"(score {top.score:.3f})",
                    run_id=self.run_id,
                    item=replace(item, findings=[*item.findings, *findings]),
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

    @no_annotations
    def expand(self, items: beam.PCollection) -> dict[str, beam.PCollection]:
        check = beam.ParDo(DecontaminateFn(self.cfg, self.run_id))
        return items | "Check" >> Guarded(check, "decontaminate", self.run_id)
