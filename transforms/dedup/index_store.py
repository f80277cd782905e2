"""Near-duplicate helpers: vectorised exact-Jaccard confirmation and the persisted index.

The near-dedup algorithm itself (signatures, band keys, candidate pairs, confirmation,
connected components, survivor) exists once, as the Beam graph in ``transforms.dedup.near``;
``confirm_flat`` is its batch form for callers holding many pairs in memory.

The index is a directory of Parquet parts (``id``, ``source``, ``shingles`` as uint64 list,
``signature`` as uint32 list) plus ``index.json`` naming the shingle and MinHash settings; a
run with different settings refuses it rather than silently comparing unlike hashes. The
index may live on any filesystem Beam knows (``tasksieve.transforms.runtime.fsio``).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from tasksieve.transforms.algorithms.minhash import MinHasher
from tasksieve.transforms.algorithms.textsim import ShingleConfig, shingle_hashes
from tasksieve.transforms.runtime import fsio

INDEX_META = "index.json"
INDEX_VERSION = 3
_PAIR_CHUNK = 1 << 12


def confirm_flat(
    pairs: np.ndarray, flat: np.ndarray, counts: np.ndarray, threshold: float
) -> tuple[np.ndarray, np.ndarray]:
    """(pairs, Jaccard) of the candidates reaching ``threshold``, shingles given flat.

    Vectorised: each chunk of pairs sorts one uint64 array of ``pair << 52 | hash >> 13 << 1
    | side``; sets may hold repeats. Two different hashes that agree on those 51 bits (chance
    ~2^-51 per pair of shingles) are found by one sort of the shingles of every document in
    a pair, and the pairs holding such a hash are recomputed on full hashes, so the result
    is exact Jaccard of the 64-bit shingle hashes.
    """
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    starts = np.cumsum(counts) - counts
    jac = np.zeros(len(pairs))
    for c0 in range(0, len(pairs), _PAIR_CHUNK):
        jac[c0 : c0 + _PAIR_CHUNK] = _jaccard_chunk(
            pairs[c0 : c0 + _PAIR_CHUNK], flat, starts, counts
        )
    for p in _clashing_pairs(pairs, flat, starts, counts).tolist():
        sa = set(flat[starts[pairs[p, 0]] : starts[pairs[p, 0]] + counts[pairs[p, 0]]].tolist())
        sb = set(flat[starts[pairs[p, 1]] : starts[pairs[p, 1]] + counts[pairs[p, 1]]].tolist())
        union_p = len(sa | sb)
        jac[p] = len(sa & sb) / union_p if union_p else 1.0
    ok = jac >= threshold
    return pairs[ok], jac[ok]


def _gather(
    docs: np.ndarray, flat: np.ndarray, starts: np.ndarray, counts: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The shingles of ``docs`` one after another, and how many each has."""
    lens = counts[docs]
    return flat[
        np.repeat(starts[docs] - np.cumsum(lens) + lens, lens) + np.arange(lens.sum())
    ], lens


def _clashing_pairs(
    pairs: np.ndarray, flat: np.ndarray, starts: np.ndarray, counts: np.ndarray
) -> np.ndarray:
    """Indices of the pairs holding two different hashes equal in their top 51 bits."""
    if len(pairs) == 0:
        return np.zeros(0, dtype=np.int64)
    docs = np.flatnonzero(np.bincount(pairs.reshape(-1), minlength=counts.size))
    vals = np.sort(_gather(docs, flat, starts, counts)[0])
    near = (vals[1:] != vals[:-1]) & ((vals[1:] >> np.uint64(13)) == (vals[:-1] >> np.uint64(13)))
    if not near.any():
        return np.zeros(0, dtype=np.int64)
    bad = np.unique(vals[1:][near] >> np.uint64(13))
    doc_vals, lens = _gather(docs, flat, starts, counts)
    hit = np.isin(doc_vals >> np.uint64(13), bad)
    bad_docs = docs[np.repeat(np.arange(docs.size), lens)[hit]]
    return np.flatnonzero(np.isin(pairs, bad_docs).any(axis=1))


def _jaccard_chunk(
    pairs: np.ndarray, flat: np.ndarray, starts: np.ndarray, counts: np.ndarray
) -> np.ndarray:
    """Jaccard on 51-bit hash prefixes of each pair in a chunk of at most ``_PAIR_CHUNK``."""
    m = len(pairs)
    vals, lens = _gather(pairs.T.reshape(-1), flat, starts, counts)
    ids = np.arange(m, dtype=np.uint64) << np.uint64(52)
    key = np.repeat(np.concatenate([ids, ids | np.uint64(1)]), lens)
    key |= (vals >> np.uint64(13)) << np.uint64(1)
    key.sort()
    body = key >> np.uint64(1)
    new = np.empty(key.size + 1, dtype=bool)
    new[0] = new[-1] = True
    np.not_equal(body[1:], body[:-1], out=new[1:-1])
    bounds = np.flatnonzero(new)
    run, last = bounds[:-1], bounds[1:] - 1
    # a run holds one side-0 entry first and a side-1 entry last iff both sets have the hash
    both = (key[run] & np.uint64(1)) < (key[last] & np.uint64(1))
    run_pair = (body[run] >> np.uint64(51)).astype(np.intp)
    union = np.bincount(run_pair, minlength=m)
    inter = np.bincount(run_pair[both], minlength=m)
    return np.where(union > 0, inter / np.maximum(union, 1), 1.0)


def index_settings(shingle: ShingleConfig, num_perm: int, seed: int) -> dict[str, Any]:
    """What an index's hashes depend on; two runs compare only if these agree."""
    return {
        "version": INDEX_VERSION,
        "shingle": asdict(shingle),
        "num_perm": num_perm,
        "seed": seed,
    }


def index_files(path: str) -> list[str]:
    """The Parquet parts of an index directory, local or remote (empty if it is new)."""
    if not fsio.is_remote(path):
        root = Path(path)
        return sorted(str(f) for f in root.glob("part-*.parquet")) if root.is_dir() else []
    return fsio.list_children(path, "part-*.parquet")


def check_index(path: str, settings: dict[str, Any]) -> None:
    """Raise ValueError when the index at ``path`` was built with other settings."""
    meta = fsio.join(path, INDEX_META)
    if not fsio.exists(meta):
        if index_files(path):
            raise ValueError(f"{path}: dedup index has parts but no {INDEX_META}")
        return
    found = json.loads(fsio.read_text(meta))
    if found != settings:
        raise ValueError(
            f"{path}: dedup index was built with {found}, this run uses {settings}; "
            "use matching --shingle/--num-perm settings or a new index directory"
        )


def read_index_part(file: str) -> Iterator[tuple[str, np.ndarray, np.ndarray]]:
    """(id, shingle hashes, signature) of each indexed task in one part."""
    table = fsio.read_parquet(file, columns=["id", "shingles", "signature"])
    for row in table.to_pylist():
        yield (
            str(row["id"]),
            np.asarray(row["shingles"], dtype=np.uint64),
            np.asarray(row["signature"], dtype=np.uint32),
        )


def write_index_part(
    path: str,
    settings: dict[str, Any],
    ids: Sequence[str],
    sources: Sequence[str],
    texts: Sequence[str],
    hasher: MinHasher,
    shingle: ShingleConfig,
) -> str:
    """Add one Parquet part holding ``texts`` to the index at ``path``; return its file."""
    import pyarrow as pa

    check_index(path, settings)
    sh = shingle_hashes(texts, shingle)
    sigs = hasher.signatures(sh)
    table = pa.table(
        {
            "id": pa.array(list(ids), pa.string()),
            "source": pa.array(list(sources), pa.string()),
            "shingles": pa.array([s.tolist() for s in sh], pa.list_(pa.uint64())),
            "signature": pa.array([s.tolist() for s in sigs], pa.list_(pa.uint32())),
        }
    )
    out = fsio.join(path, f"part-{len(index_files(path)):05d}-{secrets.token_hex(4)}.parquet")
    fsio.write_parquet(out, table, compression="zstd")
    fsio.write_text(fsio.join(path, INDEX_META), json.dumps(settings, indent=2, sort_keys=True))
    return out
