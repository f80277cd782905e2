"""NearDedup's LSH buckets: candidate pairs from the band keys of signed documents.

A bucket is every document with the same hash of one band's rows. Sending one element per
(document, band) through the shuffle costs the runner one element's encoding, decoding and
DoFn call per band of every record (16 per record at the default banding), which on the
in-memory runner cost more than the signing itself. Instead the documents are batched and each
batch sends one element per shard, ``(band, hash mod shards)``, holding the hashes of that
shard as packed signed 64-bit ints and the matching node keys. Every member of a bucket has the
same band and hash, so it lands in the same shard: the buckets, and so the candidate pairs, are
exactly those of the per-band shuffle. A shard then finds its repeated hashes with one sort.

The shuffle's parallelism is ``bands x shards`` keys (256 at the defaults), and a shard holds
``1 / shards`` of one band's hashes and keys: at 10 million tasks about 625,000 of each.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from typing import Any, Protocol

import apache_beam as beam
import numpy as np
from apache_beam.transforms.window import GlobalWindows

from tasksieve.transforms.runtime.common import count

Key = tuple[int, str, int, str]  # (0 index / 1 candidate, source_file, source_line, id)
SHARDS = 16
"""Hash shards per band: the band shuffle has ``bands x SHARDS`` keys."""
BATCH = 1024
"""Documents per batch of the band shuffle."""


class Signed(Protocol):
    """What the bucketing needs of a document (``near.Doc``)."""

    @property
    def key(self) -> Key: ...

    @property
    def bands(self) -> tuple[int, ...]: ...


def band_shards(
    docs: list[Signed], shards: int = SHARDS
) -> Iterator[tuple[tuple[int, int], tuple[bytes, list[Key]]]]:
    """``((band, shard), (packed int64 hashes, node keys))`` for a batch of documents.

    Documents without band keys (no shingles) are never candidates and send nothing."""
    live = [d for d in docs if d.bands]
    if not live:
        return
    hashes = np.array([d.bands for d in live], dtype=np.uint64).view(np.int64)
    keys = [d.key for d in live]
    shard_of = (hashes.view(np.uint64) % np.uint64(shards)).astype(np.int64)
    for band in range(hashes.shape[1]):
        col, where = hashes[:, band], shard_of[:, band]
        order = np.argsort(where, kind="stable")
        bounds = np.searchsorted(where[order], np.arange(shards + 1))
        for s in range(shards):
            rows = order[bounds[s] : bounds[s + 1]]
            if rows.size:
                yield (band, s), (col[rows].tobytes(), [keys[i] for i in rows])


def shard_buckets(
    kv: tuple[tuple[int, int], Iterable[tuple[bytes, list[Key]]]], max_bucket: int
) -> Iterator[tuple[Key, Key]]:
    """Candidate pairs of every bucket (repeated hash) in one shard."""
    parts = list(kv[1])
    hashes = np.concatenate([np.frombuffer(h, dtype=np.int64) for h, _ in parts])
    keys = [k for _, ks in parts for k in ks]
    if hashes.size < 2:
        return
    order = np.argsort(hashes, kind="stable")
    srt = hashes[order]
    starts = np.flatnonzero(np.r_[True, srt[1:] != srt[:-1]])
    ends = np.r_[starts[1:], srt.size]
    for a, b in zip(starts[ends - starts > 1], ends[ends - starts > 1], strict=True):
        yield from bucket_pairs([keys[i] for i in order[a:b]], max_bucket)


def bucket_pairs(bucket: Iterable[Key], max_bucket: int) -> Iterator[tuple[Key, Key]]:
    """Candidate pairs of one LSH bucket (index-index pairs are skipped)."""
    members = sorted(set(bucket))
    if len(members) > max_bucket:
        count("near_dedup.large_buckets")
        links = [(members[0], m) for m in members[1:]]
        links += list(itertools.pairwise(members[1:]))
    else:
        links = [(a, b) for i, a in enumerate(members) for b in members[i + 1 :]]
    for a, b in links:
        if a[0] == 0 and b[0] == 0:
            continue
        yield (a, b)


class BandShardsFn(beam.DoFn):
    """Buffer documents and send their band keys per shard (``band_shards``), ``batch`` at a
    time. The documents are buffered here rather than by ``BatchElements``: the runner samples
    the encoded size of a step's outputs, which for a list of documents means pickling every
    one of them again, and a batch is almost always sampled."""

    def __init__(self, shards: int, batch: int) -> None:
        self.shards = shards
        self.batch = batch
        self.docs: list[Signed] = []

    def start_bundle(self) -> None:
        self.docs = []

    def process(self, doc: Any) -> Iterator[Any]:  # a Signed (Beam checks hints at run time)
        self.docs.append(doc)
        if len(self.docs) >= self.batch:
            docs, self.docs = self.docs, []
            yield from band_shards(docs, self.shards)

    def finish_bundle(self) -> Iterator[Any]:
        docs, self.docs = self.docs, []
        for kv in band_shards(docs, self.shards):
            yield GlobalWindows.windowed_value(kv)


class CandidatePairs(beam.PTransform):
    """Signed documents -> distinct candidate pairs ``(a, b)``, ``a < b``."""

    def __init__(self, max_bucket: int, shards: int = SHARDS, batch: int = BATCH) -> None:
        super().__init__()
        self.max_bucket = max_bucket
        self.shards = shards
        self.batch = batch

    def expand(self, docs: beam.PCollection) -> Any:
        return (
            docs
            | "BandShards" >> beam.ParDo(BandShardsFn(self.shards, self.batch))
            | "Buckets" >> beam.GroupByKey()
            | "Pairs" >> beam.FlatMap(shard_buckets, self.max_bucket)
            | "DistinctPairs" >> beam.Distinct()
        )
