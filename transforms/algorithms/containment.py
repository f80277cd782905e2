"""Containment of small benchmark items in larger texts: an exact inverted index over shingles.

Why not MinHash-LSH: LSH banding is tuned for Jaccard, and a reworded benchmark item inside a
longer task has low Jaccard with it (the task adds many shingles of its own) even when most
of the item is in the task. Containment, ``|item ∩ task| / |item|``, is the measure that stays
high, and banding for containment (LSH Ensemble) only approximates it.

The index here computes it exactly, and cheaply because benchmark items are few and short:
every item's shingle hashes go into one sorted array (``keys``) with the owning item beside
each (``owners``). A query's sorted shingles find their runs in ``keys`` by two binary searches
each; a ``bincount`` of the owners found is the intersection size with every item at once.
Cost per query is ``O(q log N + matches)`` for ``q`` query shingles and ``N`` indexed ones,
with no false negatives: every item that shares a shingle is a candidate, and the score is
exact (up to 64-bit hash collisions, ~2^-56 per pair of shingles).

Common shingles are dropped at build time: one that occurs in more than ``max_df`` items is
boilerplate of the benchmark (``from typing import List``, ``>>> ID (``) and would make every
task that shares it look partly contained in many items. An item's size counts only the
shingles it keeps, so containment measures its distinctive content. A short item keeps few
shingles, so ``min_shared`` (an absolute count) keeps a handful of chance matches from reaching
the containment threshold.

Not guarded against: a task that contains only a small part of a large item (containment
measures the item's side); an item all of whose shingles are common (it has size 0 and never
matches here; the substring and n-gram methods still apply).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


def _ragged(n: np.ndarray) -> np.ndarray:
    """``concatenate([arange(x) for x in n])`` without a Python loop."""
    return np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n)


def max_df_for(n_items: int, fraction: float) -> int:
    """Document-frequency cap: ``fraction`` of the items, and never below 2."""
    return max(2, int(fraction * n_items))


@dataclass(frozen=True)
class Contained:
    """Items sharing shingles with a query: index, shared count and containment of the item."""

    items: np.ndarray
    shared: np.ndarray
    containment: np.ndarray


class ContainmentIndex:
    """Exact intersection sizes of a query with every indexed shingle set, after df pruning."""

    def __init__(self, shingle_sets: Sequence[np.ndarray], max_df: int) -> None:
        if max_df < 1:
            raise ValueError(f"need max_df >= 1, got {max_df}")
        n = len(shingle_sets)
        uniq = [np.unique(np.asarray(s, dtype=np.uint64)) for s in shingle_sets]
        lens = np.fromiter((u.size for u in uniq), dtype=np.int64, count=n)
        flat = np.concatenate(uniq) if lens.sum() else np.zeros(0, dtype=np.uint64)
        owners = np.repeat(np.arange(n, dtype=np.int64), lens)
        values, df = np.unique(flat, return_counts=True)
        keep = ~np.isin(flat, values[df > max_df], assume_unique=False)
        order = np.argsort(flat[keep], kind="stable")
        self.keys = flat[keep][order]
        self.owners = owners[keep][order]
        self.sizes = np.bincount(self.owners, minlength=n)
        self.dropped = int((df > max_df).sum())
        self.n_items = n

    def query(self, shingles: np.ndarray) -> Contained:
        """Every item sharing a kept shingle with ``shingles`` (any order, repeats allowed)."""
        q = np.unique(np.asarray(shingles, dtype=np.uint64))
        lo = np.searchsorted(self.keys, q, side="left")
        hi = np.searchsorted(self.keys, q, side="right")
        runs = hi - lo
        hits = self.owners[np.repeat(lo, runs) + _ragged(runs)]
        counts = np.bincount(hits, minlength=self.n_items)
        items = np.flatnonzero(counts)
        shared = counts[items]
        return Contained(items, shared, shared / np.maximum(self.sizes[items], 1))
