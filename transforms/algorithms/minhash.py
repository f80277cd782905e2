"""Vectorised MinHash signatures, LSH banding chosen from a threshold, and candidate pairs.

Signatures: one-permutation MinHash. Each shingle's 64-bit hash ``x`` is multiplied by an odd
seeded salt; its high bits choose one of ``num_perm`` bins and its low 32 bits are the value,
and a bin keeps its minimum (one ``np.minimum.at`` over the batch). Empty bins are filled by
optimal densification (shared seeded probe sequences), so the fraction of equal rows stays
an unbiased estimate of Jaccard. Signatures are 4 bytes per bin.
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

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tasksieve.transforms.algorithms.textsim import mix64

EMPTY = np.uint32(0xFFFFFFFF)
_GOLD = np.uint64(0x9E3779B97F4A7C15)
_LOW32 = np.uint64(0xFFFFFFFF)
_MAX_PROBES = 4096
_BATCH_PROBES = 8
_BYTE_INDEX = np.uint64(0x0001020304050607)  # (1 << 8t) * this >> 56 == t
_ROW_WEIGHTS = mix64(np.arange(64, dtype=np.uint64) + np.uint64(99)) | np.uint64(1)
_BAND_SALT = mix64(np.arange(1024, dtype=np.uint64) + np.uint64(4242))


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
    pairs = [(b, r) for b in range(1, num_perm + 1) for r in range(1, num_perm // b + 1)]
    bands, rows = (np.array(x, dtype=np.float64)[:, None] for x in zip(*pairs, strict=True))
    below = np.linspace(0.0, threshold, 201)[None, :]
    above = np.linspace(threshold, 1.0, 201)[None, :]
    fp = _areas(1.0 - (1.0 - below**rows) ** bands, threshold)
    fn = _areas((1.0 - above**rows) ** bands, 1.0 - threshold)
    err = (1.0 - fn_weight) * fp + fn_weight * fn
    b, r = pairs[int(np.flatnonzero(err <= err.min() + 1e-12)[0])]
    return Banding(b, r)


def _areas(ys: np.ndarray, width: float) -> np.ndarray:
    """Trapezoid area under each row of ``ys`` sampled evenly over ``width``."""
    return np.sum((ys[:, 1:] + ys[:, :-1]) / 2, axis=1) * width / (ys.shape[1] - 1)


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
    """One-permutation MinHash with optimal densification, ``num_perm`` bins, seeded."""

    def __init__(self, num_perm: int = 128, seed: int = 1) -> None:
        if num_perm < 1:
            raise ValueError(f"need num_perm >= 1, got {num_perm}")
        self.num_perm = num_perm
        self.seed = seed
        salts = mix64(np.array([seed, seed + 1], dtype=np.uint64) * _GOLD + np.uint64(0x5EED))
        self._salt = np.uint64(salts[0]) | np.uint64(1)
        self._probe_salt = np.uint64(salts[1])
        self._probes: list[np.ndarray] = []
        self._stages: list[np.ndarray] = []

    def _bin(self, x: np.ndarray) -> np.ndarray:
        """Map uniform 64-bit values to bins ``0..num_perm-1`` by their high 32 bits."""
        k = self.num_perm
        if k > 1 and k & (k - 1) == 0:  # the same value as the general formula, one shift
            return x >> np.uint64(64 - k.bit_length() + 1)
        return ((x >> np.uint64(32)) * np.uint64(k)) >> np.uint64(32)

    def _probe(self, attempt: int) -> np.ndarray:
        """The bin that each bin borrows from on a densification ``attempt`` (shared by docs)."""
        while len(self._probes) <= attempt:
            t = np.uint64(len(self._probes) * self.num_perm)
            ids = np.arange(self.num_perm, dtype=np.uint64) + t
            self._probes.append(self._bin(mix64(ids ^ self._probe_salt)).astype(np.int64))
        return self._probes[attempt]

    def _stage(self, s: int) -> np.ndarray:
        """A ``num_perm x 8`` array: the bins each bin looks at in densification stage ``s``.

        The bins looked at, in order, are the bin itself and then probes 0, 1, 2, ...;
        stage ``s`` holds places ``8s`` to ``8s + 7`` of that sequence.
        """
        while len(self._stages) <= s:
            t0 = 8 * len(self._stages)
            cols = [
                np.arange(self.num_perm, dtype=np.int64) if t == 0 else self._probe(t - 1)
                for t in range(t0, t0 + _BATCH_PROBES)
            ]
            self._stages.append(np.stack(cols, axis=1))
        return self._stages[s]

    def signatures(self, shingle_sets: Sequence[np.ndarray]) -> np.ndarray:
        """A ``len(shingle_sets) x num_perm`` uint32 array; an empty set gives all ``EMPTY``."""
        counts = np.fromiter(
            (len(s) for s in shingle_sets), dtype=np.int64, count=len(shingle_sets)
        )
        flat = np.concatenate(list(shingle_sets)) if counts.sum() else np.zeros(0, np.uint64)
        return self.signatures_flat(flat.astype(np.uint64, copy=False), counts)

    def signatures_flat(self, flat: np.ndarray, counts: np.ndarray) -> np.ndarray:
        """Signatures of documents given as one flat hash array and each one's count."""
        n, k = counts.size, self.num_perm
        out = np.full((n, k), EMPTY, dtype=np.uint32)
        if flat.size:
            x = flat * self._salt
            cell = np.repeat(np.arange(n, dtype=np.int64) * k, counts)
            cell += self._bin(x).astype(np.int64)
            val = np.minimum(x.astype(np.uint32), EMPTY - np.uint32(1))
            np.minimum.at(out.reshape(-1), cell, val)
        self._densify(out, counts > 0)
        return out

    def _densify(self, out: np.ndarray, live: np.ndarray) -> None:
        """Fill empty bins of non-empty documents from bins chosen by shared probes.

        Optimal densification: empty bin ``j`` takes the value of bin ``probe_t(j)`` for the
        first attempt ``t`` whose bin was filled by the document's own shingles. Eight places
        of the sequence (bin itself, probe 0, probe 1, ...) are tested at once: one gather of
        eight flag bytes per bin, read as a uint64 whose lowest set byte is the first hit.
        Every bin takes part in the first stage (a filled bin finds itself); the bins still
        empty go on, eight probes a stage, on their own.
        """
        n, k = out.shape
        if n == 0:
            return
        filled = out != EMPTY
        cols = self._stage(0)
        word = np.take(filled, cols.reshape(-1), axis=1).view(np.uint64)
        at = ((word & (~word + np.uint64(1))) * _BYTE_INDEX) >> np.uint64(56)
        src = cols.reshape(-1)[at.astype(np.intp) + self._row8(k)]
        out[...] = np.take_along_axis(out, src, axis=1)
        flat_out, flat_filled = out.reshape(-1), filled.reshape(-1)
        todo = np.flatnonzero(((word == 0) & live[:, None]).reshape(-1))
        col = todo % k
        base = todo - col
        stage = 1
        while todo.size and _BATCH_PROBES * stage <= _MAX_PROBES:
            cand = self._stage(stage)[col]
            w = flat_filled[base[:, None] + cand].view(np.uint64).reshape(-1)
            hit = w != 0
            first = ((w[hit] & (~w[hit] + np.uint64(1))) * _BYTE_INDEX) >> np.uint64(56)
            pick = cand[hit, first.astype(np.intp)]
            flat_out[todo[hit]] = flat_out[base[hit] + pick]
            miss = ~hit
            todo, base, col = todo[miss], base[miss], col[miss]
            stage += 1
        for cell, row in zip(todo.tolist(), base.tolist(), strict=True):
            flat_out[cell] = flat_out[row + int(np.flatnonzero(flat_filled[row : row + k])[0])]

    @staticmethod
    def _row8(k: int) -> np.ndarray:
        return np.arange(k, dtype=np.intp) * _BATCH_PROBES


def estimate(sig_a: np.ndarray, sig_b: np.ndarray) -> float:
    """MinHash estimate of Jaccard: the fraction of equal signature rows."""
    return float(np.mean(sig_a == sig_b))


def band_keys(sigs: np.ndarray, banding: Banding) -> np.ndarray:
    """A ``docs x bands`` uint64 array: a 64-bit hash of each band's rows."""
    b, r = banding.bands, banding.rows
    if b * r > sigs.shape[1]:
        raise ValueError(f"{b} bands x {r} rows need {b * r} permutations, have {sigs.shape[1]}")
    cube = sigs[:, : b * r].reshape(sigs.shape[0], b, r)
    h = np.zeros(cube.shape[:2], dtype=np.uint64)
    for j in range(r):
        h += cube[:, :, j].astype(np.uint64) * _ROW_WEIGHTS[j % _ROW_WEIGHTS.size]
    return mix64(h ^ np.uint64(r))


def candidate_pairs(keys: np.ndarray, empty: np.ndarray | None = None) -> np.ndarray:
    """Distinct (i, j), i < j, of documents sharing a band key; rows flagged ``empty`` skip."""
    n = keys.shape[0]
    live = np.arange(n) if empty is None else np.flatnonzero(~empty)
    if live.size < 2:
        return np.zeros((0, 2), dtype=np.int64)
    salted = keys[live] ^ _BAND_SALT[np.arange(keys.shape[1]) % _BAND_SALT.size]
    flat = salted.reshape(-1)
    order = np.argsort(flat)
    srt = flat[order]
    doc = live[order // keys.shape[1]]
    same = srt[1:] == srt[:-1]
    if not same.any():
        return np.zeros((0, 2), dtype=np.int64)
    run_start = np.flatnonzero(np.concatenate([[True], ~same]))
    run_len = np.diff(np.append(run_start, srt.size))
    multi = run_len > 1
    starts, lens = run_start[multi], run_len[multi]
    # each member pairs with every later member of its run
    pos = np.repeat(starts, lens) + _ragged(lens)
    later = np.repeat(starts + lens, lens) - pos - 1
    left = np.repeat(pos, later)
    right = left + 1 + _ragged(later)
    a, b = doc[left], doc[right]
    a, b = a[a != b], b[a != b]
    code = np.unique(np.minimum(a, b) * np.int64(n) + np.maximum(a, b))
    return np.stack([code // n, code % n], axis=1).astype(np.int64)


def _ragged(n: np.ndarray) -> np.ndarray:
    """``concatenate([arange(x) for x in n])`` without a Python loop."""
    return np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n)
