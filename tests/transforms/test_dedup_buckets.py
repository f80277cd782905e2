"""NearDedup's band shuffle: batches of band keys per (band, hash shard) give exactly the
candidate pairs of grouping every (band, hash) on its own, whatever the batches and shards."""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass
from itertools import islice

import apache_beam as beam
import pytest
from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline
from apache_beam.testing.util import assert_that, equal_to

from tasksieve.transforms.dedup.buckets import (
    CandidatePairs,
    Key,
    band_shards,
    bucket_pairs,
    shard_buckets,
)


@dataclass(frozen=True)
class FakeDoc:
    key: Key
    bands: tuple[int, ...]


def _docs(n: int, seed: int) -> list[FakeDoc]:
    """Docs whose band hashes repeat often (small pool), span the whole uint64 range, with
    some documents without bands and some index entries."""
    rng = random.Random(seed)
    pool = [rng.getrandbits(64) for _ in range(40)] + [0, (1 << 64) - 1, 1 << 63]
    out = []
    for i in range(n):
        kind = 0 if i % 17 == 0 else 1
        bands = () if i % 23 == 0 else tuple(rng.choice(pool) for _ in range(4))
        out.append(FakeDoc((kind, f"f{i % 3}.jsonl", i, f"t{i}"), bands))
    return out


def _reference(docs: list[FakeDoc], max_bucket: int) -> set[tuple[Key, Key]]:
    buckets: dict[tuple[int, int], list[Key]] = defaultdict(list)
    for d in docs:
        for b, h in enumerate(d.bands):
            buckets[(b, h)].append(d.key)
    return {p for members in buckets.values() for p in bucket_pairs(members, max_bucket)}


def _sharded(docs: list[FakeDoc], max_bucket: int, shards: int, batch: int) -> set[tuple]:
    groups: dict[tuple[int, int], list] = defaultdict(list)
    it = iter(docs)
    while chunk := list(islice(it, batch)):
        for k, v in band_shards(chunk, shards):
            groups[k].append(v)
    return {p for kv in groups.items() for p in shard_buckets(kv, max_bucket)}


@pytest.mark.parametrize("shards,batch", [(1, 1), (3, 7), (16, 1024), (64, 5)])
@pytest.mark.parametrize("max_bucket", [2, 5, 100])
def test_sharded_buckets_give_the_per_band_pairs(shards: int, batch: int, max_bucket: int) -> None:
    docs = _docs(300, seed=shards * 1000 + batch)
    want = _reference(docs, max_bucket)
    assert want  # the pool makes buckets
    assert _sharded(docs, max_bucket, shards, batch) == want
    assert all(not (a[0] == 0 and b[0] == 0) for a, b in want)  # index pairs skipped


def test_a_shard_holds_whole_buckets_as_packed_hashes() -> None:
    docs = _docs(50, seed=1)
    for (band, shard), (packed, keys) in band_shards(docs, 4):
        assert isinstance(packed, bytes) and len(packed) == 8 * len(keys)
        live = {d.key: d.bands[band] for d in docs if d.bands}
        assert all(live[k] % 4 == shard for k in keys)


def test_candidate_pairs_on_beam() -> None:
    docs = _docs(200, seed=7)
    want = sorted(_reference(docs, 100))
    with BeamTestPipeline() as p:
        got = p | beam.Create(docs) | CandidatePairs(100, shards=8, batch=16)
        assert_that(got, equal_to(want))
