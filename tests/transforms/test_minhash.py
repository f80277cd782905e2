"""Vectorised MinHash agrees with exact Jaccard and datasketch; banding follows the threshold."""

from __future__ import annotations

import numpy as np
import pytest
from datasketch import MinHash

from tasksieve.transforms.algorithms.minhash import (
    EMPTY,
    Banding,
    MinHasher,
    band_keys,
    candidate_pairs,
    choose_banding,
    estimate,
    explain,
)
from tasksieve.transforms.algorithms.textsim import jaccard_hashes
from tasksieve.transforms.dedup.index_store import confirm_flat


def _pair(rng: np.random.Generator, n: int, shared: int) -> tuple[np.ndarray, np.ndarray]:
    common = rng.integers(0, 2**63, shared, dtype=np.uint64)
    a = np.concatenate([common, rng.integers(0, 2**63, n - shared, dtype=np.uint64)])
    b = np.concatenate([common, rng.integers(0, 2**63, n - shared, dtype=np.uint64)])
    return np.unique(a), np.unique(b)


def test_estimate_is_unbiased_within_binomial_error() -> None:
    rng = np.random.default_rng(0)
    hasher = MinHasher(128)
    errors = []
    for _ in range(200):
        a, b = _pair(rng, 150, int(rng.integers(0, 150)))
        sig = hasher.signatures([a, b])
        errors.append(estimate(sig[0], sig[1]) - jaccard_hashes(a, b))
    assert abs(np.mean(errors)) < 0.01
    assert np.std(errors) < np.sqrt(0.25 / 128) * 1.1


def test_agrees_with_datasketch_on_the_same_sets() -> None:
    rng = np.random.default_rng(1)
    diffs = []
    for _ in range(60):
        a, b = _pair(rng, 120, int(rng.integers(20, 120)))
        ours = MinHasher(256).signatures([a, b])
        ma, mb = MinHash(256), MinHash(256)
        ma.update_batch([x.tobytes() for x in a])
        mb.update_batch([x.tobytes() for x in b])
        diffs.append(estimate(ours[0], ours[1]) - ma.jaccard(mb))
    assert abs(np.mean(diffs)) < 0.015 and np.std(diffs) < 0.06


def test_signatures_do_not_depend_on_batch_or_order() -> None:
    rng = np.random.default_rng(2)
    sets = [np.unique(rng.integers(0, 2**63, n, dtype=np.uint64)) for n in (5, 300, 40, 1)]
    hasher = MinHasher(64)
    batch = hasher.signatures(sets)
    for i, s in enumerate(sets):
        assert np.array_equal(batch[i], hasher.signatures([s])[0])


def test_empty_set_signature_is_marked_and_never_a_candidate() -> None:
    empty = np.zeros(0, dtype=np.uint64)
    sigs = MinHasher(32).signatures([empty, empty])
    assert (sigs == EMPTY).all()
    keys = band_keys(sigs, Banding(4, 8))
    assert candidate_pairs(keys, empty=sigs[:, 0] == EMPTY).shape == (0, 2)


@pytest.mark.parametrize("threshold", [0.5, 0.7, 0.8, 0.9])
def test_banding_detects_the_threshold_and_rejects_far_below(threshold: float) -> None:
    band = choose_banding(threshold, 128)
    assert band.bands * band.rows <= 128
    assert band.probability(threshold) >= 0.9
    assert band.probability(threshold - 0.3) < 0.25


def test_explain_names_bands_rows_and_curve() -> None:
    text = explain(Banding(16, 8), 0.8, 128)
    assert "16 bands x 8 rows" in text and "<- threshold" in text


def _reference_signature(hasher: MinHasher, s: np.ndarray) -> np.ndarray:
    """One document's OPH signature with optimal densification, written plainly."""
    from tasksieve.transforms.algorithms.minhash import _LOW32

    k = hasher.num_perm
    sig = np.full(k, EMPTY, dtype=np.uint32)
    for v in s.tolist():
        x = (np.array([v], dtype=np.uint64) * hasher._salt)[0]
        b = int(hasher._bin(np.array([x]))[0])
        sig[b] = min(int(sig[b]), min(int(x & _LOW32), int(EMPTY) - 1))
    filled = sig != EMPTY
    if not filled.any():
        return sig
    out = sig.copy()
    for j in np.flatnonzero(~filled).tolist():
        t = 0
        while not filled[hasher._probe(t)[j]]:
            t += 1
        out[j] = sig[hasher._probe(t)[j]]
    return out


def test_vectorised_densification_matches_the_plain_definition() -> None:
    rng = np.random.default_rng(4)
    sets = [rng.integers(0, 2**63, n, dtype=np.uint64) for n in (1, 2, 3, 10, 60, 200, 0)]
    hasher = MinHasher(128, seed=5)
    sigs = hasher.signatures(sets)
    for s, sig in zip(sets, sigs, strict=True):
        assert np.array_equal(sig, _reference_signature(hasher, s))
    assert (sigs[:-1] != EMPTY).all()


@pytest.mark.parametrize("n", [20, 60, 400])
def test_estimate_tracks_jaccard_for_small_and_large_sets(n: int) -> None:
    rng = np.random.default_rng(n)
    hasher = MinHasher(128)
    errors = []
    for _ in range(150):
        a, b = _pair(rng, n, int(rng.integers(n // 2, n + 1)))
        sig = hasher.signatures([a, b])
        errors.append(estimate(sig[0], sig[1]) - jaccard_hashes(a, b))
    assert abs(np.mean(errors)) < 0.015
    assert np.std(errors) < np.sqrt(0.25 / 128) * 1.1


def test_seed_changes_signatures() -> None:
    s = np.unique(np.random.default_rng(6).integers(0, 2**63, 50, dtype=np.uint64))
    assert not np.array_equal(MinHasher(64, 1).signatures([s]), MinHasher(64, 2).signatures([s]))


def test_candidate_pairs_lists_every_pair_of_a_shared_bucket_once() -> None:
    keys = np.array([[1, 7], [1, 8], [2, 7], [1, 7], [3, 9]], dtype=np.uint64)
    pairs = candidate_pairs(keys).tolist()
    assert pairs == [[0, 1], [0, 2], [0, 3], [1, 3], [2, 3]]
    assert candidate_pairs(keys, empty=np.array([1, 0, 0, 0, 0], bool)).tolist() == [
        [1, 3],
        [2, 3],
    ]


def test_confirm_flat_is_exact_jaccard_with_repeats_and_near_clashes() -> None:
    rng = np.random.default_rng(7)
    sets = [rng.integers(0, 2**63, int(rng.integers(1, 40)), dtype=np.uint64) for _ in range(30)]
    sets[1] = np.concatenate([sets[0][:20], sets[0][:5]])  # repeats inside one document
    sets[2] = sets[0] ^ np.uint64(1)  # agree with sets[0] on all but the lowest bit
    flat = np.concatenate(sets)
    counts = np.array([len(s) for s in sets])
    pairs = np.array([(i, j) for i in range(30) for j in range(i + 1, 30)])
    kept, scores = confirm_flat(pairs, flat, counts, 0.0)
    assert len(kept) == len(pairs)
    for (i, j), score in zip(kept.tolist(), scores.tolist(), strict=True):
        a, b = set(sets[i].tolist()), set(sets[j].tolist())
        assert score == len(a & b) / len(a | b)
    above = {tuple(p) for p in confirm_flat(pairs, flat, counts, 0.5)[0].tolist()}
    assert (0, 1) in above and (0, 2) not in above


@pytest.mark.parametrize("num_perm", [1, 2, 3, 64, 100, 128])
def test_bins_follow_the_general_formula(num_perm: int) -> None:
    x = np.random.default_rng(8).integers(0, 2**64, 1000, dtype=np.uint64)
    general = ((x >> np.uint64(32)) * np.uint64(num_perm)) >> np.uint64(32)
    assert np.array_equal(MinHasher(num_perm)._bin(x), general)


def test_signatures_take_the_minimum_per_bin() -> None:
    from tasksieve.transforms.algorithms.minhash import _LOW32

    rng = np.random.default_rng(9)
    sets = [rng.integers(0, 2**63, n, dtype=np.uint64) for n in (500, 0, 3000)]
    hasher = MinHasher(64, seed=3)
    sigs = hasher.signatures(sets)
    for s, sig in zip(sets, sigs, strict=True):
        x = s * hasher._salt
        bins = hasher._bin(x)
        for b in range(64):
            vals = x[bins == b] & _LOW32
            if vals.size:
                assert sig[b] == min(int(vals.min()), int(EMPTY) - 1)
