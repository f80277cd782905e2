"""NearDedup: drop near-repeated prompts, keeping the earliest record of each cluster.

ExactDedup lives in ``tasksieve.transforms.dedup.exact``; the connected components of step 4
in ``tasksieve.transforms.dedup.components``.

NearDedup is distributed; no step holds all documents on one worker:
  1. ``SignFn`` (batched): shingle hashes and MinHash signature per task. Against an index
     (``DedupConfig.index_path``) each candidate is looked up in the index loaded once per
     worker (``transforms.dedup.index_lookup``), which yields confirmed (entry, candidate) edges
     for step 4; with ``index_lookup="shuffle"`` the index entries are read from their
     Parquet parts in parallel and go through steps 2 and 3 with the candidates instead.
  2. band keys ``(band, hash of the band's rows)`` -> buckets -> candidate pairs (all pairs
     of a bucket of up to ``max_bucket`` members; a larger bucket yields a star to its
     smallest member plus a chain, so it stays connected at linear cost) -> Distinct. The
     shuffle moves batches of band keys per ``(band, hash shard)``, not one element per
     band of every record (``transforms.dedup.buckets``).
  3. exact Jaccard confirmation: two CoGroupByKey joins bring both shingle sets to the pair.
  4. connected components: ``cc_rounds`` rounds of min-label propagation, each followed by
     pointer jumping (label := label of my label). Propagation alone needs diameter rounds;
     with jumping a label travels roughly twice as far per round, so the default 4 rounds
     settle clusters whose diameter is below ~2^4. Whatever has not settled then (edges whose
     ends still disagree, normally none) is finished exactly by a union-find over those
     residual edges on one worker, so the result never depends on the bound.
  5. survivor: the member with the smallest ``(source_file, source_line, id)``; index entries
     sort first. Others are rejected ``dedup.near`` (or ``dedup.index``) naming the survivor
     and their Jaccard with their most similar confirmed neighbour.

Faults (``transforms.runtime.deadletter``): a batch whose signing raises is signed again one item at
a time; an item that still raises, and both ends of a pair whose check raises, are rejected
``near_dedup.error``. The rest is decided without the failed pairs: a record may still be
dropped as a near-duplicate of one rejected for an error, and records linked only through a
failed pair are not joined. The steps on keys alone (buckets, components) and the index
reading are not guarded: a failure there fails the run.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

import apache_beam as beam
import numpy as np
from apache_beam import pvalue
from apache_beam.typehints.decorators import no_annotations

from tasksieve.schemas import Finding
from tasksieve.transforms.algorithms.minhash import (
    EMPTY,
    Banding,
    MinHasher,
    band_keys,
    choose_banding,
    explain,
)
from tasksieve.transforms.algorithms.textsim import ShingleConfig, jaccard_hashes, shingle_hashes
from tasksieve.transforms.dedup.buckets import CandidatePairs, Key
from tasksieve.transforms.dedup.components import Components
from tasksieve.transforms.dedup.index_lookup import lookup_edges
from tasksieve.transforms.dedup.index_store import (
    check_index,
    index_files,
    index_settings,
    read_index_part,
)
from tasksieve.transforms.runtime.common import REJECTED, count, rejected
from tasksieve.transforms.runtime.deadletter import (
    DEAD,
    Attempt,
    Fault,
    Guarded,
    fault_of,
    reject_records,
)
from tasksieve.transforms.runtime.items import Item, rejection


@dataclass(frozen=True)
class DedupConfig:
    """Near-dup threshold (exact Jaccard of shingles), shingling, MinHash and LSH settings."""

    near_threshold: float = 0.8
    shingle_size: int = 3
    num_perm: int = 128
    enabled: bool = True
    shingle_kind: str = "word"
    strip_comments: bool = False
    strip_docstrings: bool = False
    canonical_identifiers: bool = False
    seed: int = 1
    fn_weight: float = 0.95
    max_bucket: int = 100
    cc_rounds: int = 4
    index_path: str | None = None
    index_lookup: str = "worker"
    """How candidates meet the index: ``worker`` (each worker loads it; see
    ``transforms.dedup.index_lookup``) or ``shuffle`` (index entries join the band shuffle;
    for an index too large for a worker's memory)."""

    def __post_init__(self) -> None:
        if not 0.0 < self.near_threshold <= 1.0:
            raise ValueError(f"need 0 < near_threshold <= 1, got {self.near_threshold}")
        if self.shingle_size < 1:
            raise ValueError(f"need shingle_size >= 1, got {self.shingle_size}")
        if self.num_perm < 16:
            raise ValueError(f"need num_perm >= 16, got {self.num_perm}")
        if self.max_bucket < 2:
            raise ValueError(f"need max_bucket >= 2, got {self.max_bucket}")
        if not 0 <= self.cc_rounds <= 32:
            raise ValueError(f"need 0 <= cc_rounds <= 32, got {self.cc_rounds}")
        if self.index_lookup not in ("worker", "shuffle"):
            raise ValueError(
                f"index_lookup must be 'worker' or 'shuffle', got {self.index_lookup!r}"
            )
        self.shingle()

    def shingle(self) -> ShingleConfig:
        return ShingleConfig(
            kind=self.shingle_kind,
            size=self.shingle_size,
            strip_comments=self.strip_comments,
            strip_docstrings=self.strip_docstrings,
            canonical_identifiers=self.canonical_identifiers,
        )

    def banding(self) -> Banding:
        return choose_banding(self.near_threshold, self.num_perm, self.fn_weight)

    def index_settings(self) -> dict[str, Any]:
        return index_settings(self.shingle(), self.num_perm, self.seed)

    def explain(self) -> str:
        return explain(self.banding(), self.near_threshold, self.num_perm, "near dedup")


def node_key(item: Item) -> Key:
    return (1, item.source_file, item.source_line, item.id)


@dataclass(frozen=True)
class Doc:
    """A node of the near-dup graph: key, sorted shingle hashes and LSH band keys."""

    key: Key
    shingles: np.ndarray
    bands: tuple[int, ...]


def make_docs(
    keys: list[Key], shingle_sets: list[np.ndarray], sigs: np.ndarray, banding: Banding
) -> Iterator[Doc]:
    """Docs with band keys; documents with no shingles get no band keys (never candidates)."""
    bk = band_keys(sigs, banding)
    for key, sh, sig, row in zip(keys, shingle_sets, sigs, bk, strict=True):
        empty = sig[0] == EMPTY
        count("near_dedup.empty" if empty else "near_dedup.signed")
        yield Doc(key, sh, () if empty else tuple(int(v) for v in row))


class SignFn(beam.DoFn):
    """Shingle, hash and band a batch of items (vectorised across the batch)."""

    def __init__(self, cfg: DedupConfig) -> None:
        self.cfg = cfg

    def setup(self) -> None:
        self.hasher = MinHasher(self.cfg.num_perm, self.cfg.seed)
        self.banding = self.cfg.banding()

    def sign(self, batch: list[Item]) -> list[Doc]:
        sh = shingle_hashes([it.prompt for it in batch], self.cfg.shingle())
        sigs = self.hasher.signatures(sh)
        return list(make_docs([node_key(it) for it in batch], sh, sigs, self.banding))

    def process(self, batch: list[Item]) -> Iterator[Any]:
        """The batch's docs; if signing it raises, each item signed alone, and an item that
        still raises sent to ``UNSIGNED`` with its fault. Retrying here rather than in a
        second step keeps the docs one PCollection: a Flatten of two would be written out
        and read back whole on the in-memory runner."""
        try:
            docs = self.sign(batch)
        except Exception:
            docs = []
            for it in batch:
                try:
                    docs += self.sign([it])
                except Exception as exc:
                    yield pvalue.TaggedOutput(UNSIGNED, (node_key(it), fault_of("near_dedup", exc)))
        yield from docs


UNSIGNED = "unsigned"


def read_index_docs(file: str, cfg: DedupConfig) -> Iterator[Doc]:
    """Docs of one index part, keyed to sort before every candidate."""
    banding = cfg.banding()
    rows = list(read_index_part(file))
    if not rows:
        return
    sigs = np.stack([r[2] for r in rows])
    keys: list[Key] = [(0, "", 0, r[0]) for r in rows]
    for doc in make_docs(keys, [r[1] for r in rows], sigs, banding):
        count("near_dedup.index_entries")
        yield doc


def _first_half(kv: tuple[Key, dict[str, list[Any]]]) -> Iterator[tuple[Key, tuple[Key, Any]]]:
    for sh in kv[1]["sh"][:1]:
        for other in kv[1]["pair"]:
            yield (other, (kv[0], sh))


def confirm(
    kv: tuple[Key, dict[str, list[Any]]], threshold: float
) -> Iterator[tuple[Key, Key, float]]:
    """Exact Jaccard of each candidate pair; emit the pairs at or above the threshold."""
    for sh in kv[1]["sh"][:1]:
        for other, osh in kv[1]["half"]:
            score = jaccard_hashes(sh, osh)
            if score >= threshold:
                count("near_dedup.confirmed_pairs")
                yield (other, kv[0], score) if other < kv[0] else (kv[0], other, score)
            else:
                count("near_dedup.unconfirmed_pairs")


def _best(a: tuple[Key, float], b: tuple[Key, float]) -> tuple[Key, float]:
    return a if (a[1], b[0]) > (b[1], a[0]) else b


class DecideFn(beam.DoFn):
    """Emit each item as kept (with findings for the members it absorbed) or rejected.

    The decisions come as one side input, node -> {"drop", "absorbed", "failed"} lists,
    holding only nodes of confirmed pairs or failed steps, so the items themselves are never
    shuffled to meet them."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id

    def process(self, item: Item, decided: Mapping[Key, dict[str, list[Any]]]) -> Iterator[Any]:
        got = decided.get(node_key(item)) or {}
        drop, absorbed = got.get("drop", []), got.get("absorbed", [])
        yield from decide(item, drop, absorbed, got.get("failed", []), self.run_id)


def decide(
    item: Item, drop: list[Any], absorbed: list[Any], failed: list[Fault], run_id: str
) -> Iterator[Any]:
    """The item kept (with findings for the members it absorbed) or its rejection."""
    if failed:  # signing it or checking one of its pairs raised
        yield from reject_records([item], failed[0], run_id)
        return
    if drop:
        survivor, (nbr, score) = drop[0]
        from_index = survivor[0] == 0
        via = "" if nbr == survivor else f" with {nbr[3]}"
        what = "indexed task" if from_index else "near-duplicate of"
        yield rejected(
            rejection(
                stage="near_dedup",
                reason="dedup.index" if from_index else "dedup.near",
                detail=f"{what} {survivor[3]} (Jaccard {score:.3f}{via})",
                run_id=run_id,
                item=item,
            )
        )
        return
    found = [
        Finding(kind="near_dup", other_id=k[3], method="minhash", score=round(s, 4))
        for k, s in sorted(absorbed)
    ]
    count("near_dedup.kept")
    yield replace(item, findings=[*item.findings, *found]) if found else item


class NearDedup(beam.PTransform):
    """Distributed MinHash-LSH near-duplicate removal (see the module docstring)."""

    def __init__(self, cfg: DedupConfig, run_id: str) -> None:
        super().__init__()
        self.cfg = cfg
        self.run_id = run_id

    @no_annotations
    def expand(self, items: beam.PCollection) -> dict[str, beam.PCollection]:
        cfg = self.cfg
        if not cfg.enabled:
            return {"ok": items, REJECTED: items | "NoRejections" >> beam.FlatMap(lambda _: [])}
        batches = items | "Batch" >> beam.BatchElements(min_batch_size=1, max_batch_size=512)
        signed = batches | "Sign" >> beam.ParDo(SignFn(cfg)).with_outputs(UNSIGNED, main="ok")
        docs = signed["ok"]
        index_edges = None
        if cfg.index_path and cfg.index_lookup == "worker":
            check_index(cfg.index_path, cfg.index_settings())
            index_edges = lookup_edges(
                docs, cfg.banding(), cfg.near_threshold, index_files(cfg.index_path)
            )
        elif cfg.index_path:
            check_index(cfg.index_path, cfg.index_settings())
            index = (
                items.pipeline
                | "IndexParts" >> beam.Create(index_files(cfg.index_path))
                | "ReadIndex" >> beam.FlatMap(read_index_docs, cfg)
            )
            docs = (docs, index) | "WithIndex" >> beam.Flatten()
        pairs = docs | "CandidatePairs" >> CandidatePairs(cfg.max_bucket)
        # only the nodes of a candidate pair need their shingles at the confirmation joins
        paired = (
            pairs
            | "PairNodes" >> beam.FlatMap(lambda ab: [(ab[0], True), (ab[1], True)])
            | "DistinctNodes" >> beam.CombinePerKey(any)
        )
        shingles = docs | "KeyShingles" >> beam.FlatMap(
            lambda d, nodes: [(d.key, d.shingles)] if d.key in nodes else [],
            beam.pvalue.AsDict(paired),
        )
        edges = (
            {
                "sh": shingles,
                "half": (
                    {"sh": shingles, "pair": pairs}
                    | "JoinFirst" >> beam.CoGroupByKey()
                    | "FirstHalf" >> beam.FlatMap(_first_half)
                ),
            }
            | "JoinSecond" >> beam.CoGroupByKey()
            | "Confirm" >> Attempt(beam.FlatMap(confirm, cfg.near_threshold), "near_dedup")
        )
        failed = (
            signed[UNSIGNED],
            edges[DEAD] | "ConfirmFailed" >> beam.FlatMap(failed_keys),
        ) | "Failed" >> beam.Flatten()
        edges = edges["ok"]
        if index_edges is not None:
            edges = (edges, index_edges) | "WithIndexEdges" >> beam.Flatten()
        labels = (
            edges
            | "Pairs2" >> beam.Map(lambda e: (e[0], e[1]))
            | "Components" >> Components(cfg.cc_rounds)
        )
        best = (
            edges
            | "Scores" >> beam.FlatMap(lambda e: [(e[0], (e[1], e[2])), (e[1], (e[0], e[2]))])
            | "Best" >> beam.CombinePerKey(lambda vs: _reduce_best(vs))
        )
        drops = (
            {"label": labels, "best": best}
            | "JoinBest" >> beam.CoGroupByKey()
            | "Drops"
            >> beam.FlatMap(
                lambda kv: [
                    (kv[0], (lab, b))
                    for lab in kv[1]["label"]
                    for b in kv[1]["best"]
                    if lab != kv[0]
                ]
            )
        )
        absorbed = drops | "Absorbed" >> beam.MapTuple(lambda node, d: (d[0], (node, d[1][1])))
        decided = {
            "drop": drops,
            "absorbed": absorbed,
            "failed": failed,
        } | "JoinDecisions" >> beam.CoGroupByKey()
        out = items | "Decide" >> Guarded(
            beam.ParDo(DecideFn(self.run_id), beam.pvalue.AsDict(decided)),
            "near_dedup",
            self.run_id,
        )
        return out


def failed_keys(dead: tuple[Any, Fault]) -> Iterator[tuple[Key, Fault]]:
    """``(node key, fault)`` for every node of a failed pair check: the element is
    ``(key, {"sh": ..., "half": [(other key, shingles), ...]})``."""
    element, fault = dead
    for key in [element[0], *(other for other, _ in element[1]["half"])]:
        yield key, fault


def _reduce_best(values: Iterable[tuple[Key, float]]) -> tuple[Key, float]:
    out: tuple[Key, float] | None = None
    for v in values:
        out = v if out is None else _best(out, v)
    assert out is not None
    return out
