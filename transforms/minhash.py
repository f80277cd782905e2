"""Vectorised MinHash signatures, LSH banding chosen from a threshold, and candidate pairs.

Signatures: each shingle's 64-bit hash is remixed and cut to 32 bits ``x``
and permutation ``i`` is ``h_i(x) = a_i * x + b_i mod 2^32`` (``a_i`` odd, so a bijection);
the signature is the minimum per permutation, computed for a batch of documents at once on a
padded ``docs x shingles x perms`` uint32 array (a document is padded with its own first
shingle, which leaves every minimum unchanged). Signatures are 4 bytes per permutation.
``tests/transforms/test_minhash.py`` checks the estimate agrees with exact Jaccard and with
datasketch within the binomial error of ``num_perm`` samples.

Banding: ``choose_banding`` picks bands x rows (b*r <= num_perm) minimising a weighted sum of
the false-positive area (integral of the detection curve below the threshold) and the
false-negative area (integral of one minus it above), as datasketch's ``_optimal_param`` does,
but weighting misses more (0.95 by default) because every candidate is confirmed by exact
Jaccard afterwards: a false candidate costs one comparison, a miss is never recovered.

Not guarded against: 32-bit minima tie with probability ~n/2^32 per permutation, which
raises estimates by that much; LSH recall is probabilistic (the curve printed by ``explain``).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from transforms.textsim import mix64

EMPTY = np.uint32(0xFFFFFFFF)
_GOLD = np.uint64(0x9E3779B97F4A7C15)
_CHUNK_ELEMS = 1 << 18


@dataclass(frozen=True)
class Banding:
    """LSH banding: ``bands`` bands of ``rows`` signature rows each."""

    bands: int
    rows: int

    def probability(self, s: float) -> float:
        """Chance that two sets with Jaccard ``s`` share at least one band."""
        return float(1.0 - (1.0 - s**self.rows) ** self.bands)


def _curve(banding: Banding, xs: np.ndarray) -> np.ndarray:
    return 1.0 - (1.0 - xs**banding.rows) ** banding.bands


def _area(ys: np.ndarray, lo: float, hi: float) -> float:
    return float(np.sum((ys[1:] + ys[:-1]) / 2) * (hi - lo) / (len(ys) - 1))


def banding_errors(banding: Banding, threshold: float) -> tuple[float, float]:
    """(false-positive area below the threshold, false-negative area above it)."""
    below = np.linspace(0.0, threshold, 201)
    above = np.linspace(threshold, 1.0, 201)
    fp = _area(_curve(banding, below), 0.0, threshold)
    fn = _area(1.0 - _curve(banding, above), threshold, 1.0)
    return fp, fn


def choose_banding(threshold: float, num_perm: int, fn_weight: float = 0.95) -> Banding:
    """Bands x rows for ``threshold`` minimising (1-w)*FP area + w*FN area."""
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"need 0 < threshold <= 1, got {threshold}")
    if not 0.0 <= fn_weight <= 1.0:
        raise ValueError(f"need 0 <= fn_weight <= 1, got {fn_weight}")
    best: tuple[float, Banding] | None = None
    for b in range(1, num_perm + 1):
        for r in range(1, num_perm // b + 1):
            band = Banding(b, r)
            fp, fn = banding_errors(band, threshold)
            err = (1.0 - fn_weight) * fp + fn_weight * fn
            if best is None or err < best[0] - 1e-12:
                best = (err, band)
    assert best is not None
    return best[1]


def explain(banding: Banding, threshold: float, num_perm: int, what: str = "near dedup") -> str:
    """Human-readable banding choice and detection curve."""
    fp, fn = banding_errors(banding, threshold)
    b, r = banding.bands, banding.rows
    grid = sorted({0.3, 0.4, 0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, round(threshold, 3)})
    lines = [
        f"{what}: Jaccard threshold {threshold:.2f}, {num_perm} permutations -> "
        f"{b} bands x {r} rows ({b * r} used)",
        f"  P(candidate | Jaccard s) = 1 - (1 - s^{r})^{b}; "
        f"false-positive area {fp:.4f}, false-negative area {fn:.4f}",
        "  candidates are confirmed by exact Jaccard of the shingles before anything is dropped",
        "      s  P(candidate)",
    ]
    for s in grid:
        mark = "  <- threshold" if abs(s - threshold) < 1e-9 else ""
        lines.append(f"   {s:4.2f}  {banding.probability(s):.4f}{mark}")
    return "\n".join(lines)


class MinHasher:
    """MinHash with ``num_perm`` permutations ``a*x+b mod 2^32``, seeded for reproducibility."""

    def __init__(self, num_perm: int = 128, seed: int = 1) -> None:
        if num_perm < 1:
            raise ValueError(f"need num_perm >= 1, got {num_perm}")
        rng = np.random.default_rng(seed)
        self.num_perm = num_perm
        self.seed = seed
        self.a = rng.integers(0, 1 << 32, num_perm, dtype=np.uint64).astype(np.uint32) | 1
        self.b = rng.integers(0, 1 << 32, num_perm, dtype=np.uint64).astype(np.uint32)

    def signatures(self, shingle_sets: Sequence[np.ndarray]) -> np.ndarray:
        """A ``len(shingle_sets) x num_perm`` uint32 array; an empty set gives all ``EMPTY``."""
        n = len(shingle_sets)
        out = np.full((n, self.num_perm), EMPTY, dtype=np.uint32)
        lens = np.fromiter((len(s) for s in shingle_sets), dtype=np.int64, count=n)
        docs = np.flatnonzero(lens)
        if docs.size == 0:
            return out
        docs = docs[np.argsort(lens[docs], kind="stable")]
        flat = mix64(np.concatenate([shingle_sets[i] for i in docs.tolist()])).astype(np.uint32)
        dl = lens[docs]
        starts = np.concatenate([[0], np.cumsum(dl)[:-1]])
        i = 0
        while i < docs.size:
            width = int(dl[i])
            per_doc = max(1, _CHUNK_ELEMS // (self.num_perm * max(1, width)))
            j = min(docs.size, i + per_doc)
            width = int(dl[j - 1])
            cols = np.minimum(np.arange(width)[None, :], dl[i:j, None] - 1) + starts[i:j, None]
            x = flat[cols]
            h = np.multiply(x[:, :, None], self.a)
            h += self.b
            out[docs[i:j]] = h.min(axis=1)
            i = j
        return out


def estimate(sig_a: np.ndarray, sig_b: np.ndarray) -> float:
    """MinHash estimate of Jaccard: the fraction of equal signature rows."""
    return float(np.mean(sig_a == sig_b))


def band_keys(sigs: np.ndarray, banding: Banding) -> np.ndarray:
    """A ``docs x bands`` uint64 array: a 64-bit hash of each band's rows."""
    b, r = banding.bands, banding.rows
    if b * r > sigs.shape[1]:
        raise ValueError(f"{b} bands x {r} rows need {b * r} permutations, have {sigs.shape[1]}")
    cube = sigs[:, : b * r].reshape(sigs.shape[0], b, r).astype(np.uint64)
    h = cube[:, :, 0] + _GOLD
    for j in range(1, r):
        h = mix64(h * _GOLD + cube[:, :, j])
    return mix64(h)


def candidate_pairs(keys: np.ndarray, empty: np.ndarray | None = None) -> np.ndarray:
    """Distinct (i, j), i < j, of documents sharing a band key; rows flagged ``empty`` skip."""
    n = keys.shape[0]
    live = np.arange(n) if empty is None else np.flatnonzero(~empty)
    found: list[np.ndarray] = []
    for band in range(keys.shape[1]):
        col = keys[live, band]
        order = np.argsort(col, kind="stable")
        srt = col[order]
        same = srt[1:] == srt[:-1]
        if not same.any():
            continue
        idx = live[order]
        edges = np.flatnonzero(np.diff(np.concatenate([[False], same, [False]]).astype(np.int8)))
        starts, ends = edges[0::2], edges[1::2]
        two = ends - starts == 1
        found.append(np.stack([idx[starts[two]], idx[ends[two]]], axis=1))
        for s, e in zip(starts[~two].tolist(), ends[~two].tolist(), strict=True):
            found.append(np.array(list(itertools.combinations(idx[s : e + 1].tolist(), 2))))
    if not found:
        return np.zeros((0, 2), dtype=np.int64)
    pairs = np.sort(np.concatenate(found).astype(np.int64), axis=1)
    return np.unique(pairs, axis=0)
