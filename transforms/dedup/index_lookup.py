"""Near-dedup against the persisted index by a per-worker lookup, not a shuffle of the history.

Each worker process loads the index once (``apache_beam.utils.shared``: one copy per process,
shared by its DoFn threads): ids, the shingle hashes flat, and per LSH band the entries'
band hashes sorted. A candidate's band hashes are looked up by binary search, the entries
found are confirmed by exact Jaccard, and each confirmed (index entry, candidate) pair becomes
an edge of the near-dup graph, exactly as a pair confirmed by the shuffle would. Only this
run's candidates are shuffled; the history stays where it is.

Against the shuffle (``DedupConfig.index_lookup="shuffle"``, the index entries flattened into
the band GroupByKey and both Jaccard joins) the confirmed edges are the same, except that a
band bucket of more than ``max_bucket`` members is no longer thinned to a star and a chain
for its index members: every index entry sharing a band with a candidate is checked.
What it does NOT do: hold an index larger than a worker's memory (about 8 bytes per shingle
plus 8 per band per entry; ``benchmarks/dedup_index.py`` measures it): for such an index use
``index_lookup="shuffle"``. Duplicate ids in the index (the same task indexed twice) are
loaded once.
"""

from __future__ import annotations

import io
from collections.abc import Iterator, Sequence
from typing import Any, Protocol

import apache_beam as beam
import numpy as np
from apache_beam.io.filesystems import FileSystems
from apache_beam.utils import shared

from tasksieve.transforms.algorithms.minhash import EMPTY, Banding, band_keys
from tasksieve.transforms.algorithms.textsim import jaccard_hashes
from tasksieve.transforms.runtime.common import count

Key = tuple[int, str, int, str]  # tasksieve.transforms.dedup.near's node key


class Doc(Protocol):
    """What the lookup needs of ``tasksieve.transforms.dedup.near.Doc``."""

    @property
    def key(self) -> Key: ...
    @property
    def shingles(self) -> np.ndarray: ...
    @property
    def bands(self) -> tuple[int, ...]: ...


def read_part_columns(file: str) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    """(ids, shingle hashes flat, shingle count per entry, signatures) of one index part."""
    import pyarrow.parquet as pq

    with FileSystems.open(file) as f:
        table = pq.read_table(io.BytesIO(f.read()), columns=["id", "shingles", "signature"])
    sh = table.column("shingles").combine_chunks()
    sig = table.column("signature").combine_chunks()
    n = table.num_rows
    flat = np.asarray(sh.values, dtype=np.uint64) if n else np.zeros(0, np.uint64)
    offsets = np.asarray(sh.offsets, dtype=np.int64) if n else np.zeros(1, np.int64)
    sigs = np.asarray(sig.values, dtype=np.uint32).reshape(n, -1) if n else np.zeros((0, 1))
    return [str(x) for x in table.column("id").to_pylist()], flat, np.diff(offsets), sigs


class LoadedIndex:
    """An index in memory: entries' shingles and, per band, their band hashes sorted."""

    def __init__(self, files: Sequence[str], banding: Banding) -> None:
        ids: list[str] = []
        flats, counts, sigs = [], [], []
        for file in files:
            i, flat, cnt, sig = read_part_columns(file)
            ids += i
            flats.append(flat)
            counts.append(cnt)
            sigs.append(sig)
        flat = np.concatenate(flats) if flats else np.zeros(0, np.uint64)
        cnt = np.concatenate(counts) if counts else np.zeros(0, np.int64)
        width = banding.bands * banding.rows
        allsig = np.concatenate(sigs) if sigs else np.zeros((0, width), np.uint32)
        _, first = np.unique(np.asarray(ids, dtype=object), return_index=True)
        keep = np.sort(first).astype(np.int64)  # the first entry of each id
        live = keep[allsig[keep, 0] != EMPTY] if keep.size else keep  # empty texts match nothing
        keys = band_keys(allsig[live], banding)
        self.ids = ids
        self.flat = flat
        self.starts = np.cumsum(cnt) - cnt
        self.counts = cnt
        self.band_hashes: list[np.ndarray] = []
        self.band_rows: list[np.ndarray] = []
        for b in range(banding.bands):
            order = np.argsort(keys[:, b], kind="stable")
            self.band_hashes.append(keys[order, b])
            self.band_rows.append(live[order])
        self.entries = len(live)

    def shingles(self, row: int) -> np.ndarray:
        start = int(self.starts[row])
        return self.flat[start : start + int(self.counts[row])]

    def candidates(self, bands: Sequence[int]) -> np.ndarray:
        """Rows sharing at least one band hash with ``bands`` (one per band, in band order)."""
        found = []
        for b, h in enumerate(bands):
            col = self.band_hashes[b]
            lo = np.searchsorted(col, np.uint64(h), side="left")
            hi = np.searchsorted(col, np.uint64(h), side="right")
            if hi > lo:
                found.append(self.band_rows[b][lo:hi])
        return np.unique(np.concatenate(found)) if found else np.zeros(0, np.int64)

    def matches(
        self, shingles: np.ndarray, bands: Sequence[int], threshold: float
    ) -> list[tuple[str, float]]:
        """(index id, Jaccard) of every entry at or above ``threshold``."""
        out = []
        for row in self.candidates(bands).tolist():
            score = jaccard_hashes(shingles, self.shingles(row))
            if score >= threshold:
                out.append((self.ids[row], score))
        return out


def index_key(entry_id: str) -> Key:
    """An index entry's node key: sorts before every candidate (index entries survive)."""
    return (0, "", 0, entry_id)


class IndexLookupFn(beam.DoFn):
    """Confirmed (index entry, candidate, Jaccard) edges of each candidate Doc."""

    def __init__(self, banding: Banding, threshold: float, files: Sequence[str]) -> None:
        self.banding = banding
        self.threshold = threshold
        self.files = tuple(files)
        self.handle = shared.Shared()
        self.index: LoadedIndex | None = None

    def setup(self) -> None:
        files, banding = self.files, self.banding
        tag = "\n".join([str(banding), *files])
        self.index = self.handle.acquire(lambda: LoadedIndex(files, banding), tag=tag)

    def process(self, doc: Doc) -> Iterator[tuple[Key, Key, float]]:
        assert self.index is not None
        if not doc.bands:
            return
        count("near_dedup.index_lookups")
        for entry_id, score in self.index.matches(doc.shingles, doc.bands, self.threshold):
            count("near_dedup.confirmed_pairs")
            count("near_dedup.index_matches")
            yield (index_key(entry_id), doc.key, score)


def lookup_edges(docs: Any, banding: Banding, threshold: float, files: Sequence[str]) -> Any:
    """The index edges of ``docs`` (a PCollection of Doc)."""
    return docs | "IndexLookup" >> beam.ParDo(IndexLookupFn(banding, threshold, files))
