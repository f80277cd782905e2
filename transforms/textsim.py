"""Text normalisation, shingling, MinHash and Jaccard: the plain functions behind dedup.

This is the first, simple form: word shingles of a lowercased, punctuation-free text and
datasketch MinHash. It does not canonicalise identifiers, so a task whose names were all
renamed may slip past; confirmation always uses exact Jaccard on the shingles.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from datasketch import MinHash, MinHashLSH

_WORD = re.compile(r"[a-z0-9_]+")


def normalize_text(text: str) -> str:
    """Lowercase and keep only word characters, single-spaced."""
    return " ".join(_WORD.findall(text.lower()))


def shingles(text: str, n: int = 3) -> frozenset[str]:
    """Word n-grams of the normalised text; a text shorter than n words is one shingle."""
    words = normalize_text(text).split()
    if not words:
        return frozenset()
    if len(words) < n:
        return frozenset([" ".join(words)])
    return frozenset(" ".join(words[i : i + n]) for i in range(len(words) - n + 1))


def jaccard(a: frozenset[str] | set[str], b: frozenset[str] | set[str]) -> float:
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def containment(a: frozenset[str] | set[str], b: frozenset[str] | set[str]) -> float:
    """Fraction of ``a`` found in ``b``."""
    if not a:
        return 0.0
    return len(a & b) / len(a)


def minhash(sh: Iterable[str], num_perm: int = 128, seed: int = 1) -> MinHash:
    m = MinHash(num_perm=num_perm, seed=seed)
    m.update_batch([s.encode("utf-8", "surrogatepass") for s in sh])
    return m


@dataclass(frozen=True)
class DocShingles:
    """One document for near-dup search: its id, its tie-break order and its shingles."""

    id: str
    order: tuple[str, int, str]
    shingles: frozenset[str]


def near_duplicates(
    docs: Sequence[DocShingles], threshold: float = 0.8, num_perm: int = 128
) -> dict[str, tuple[str, float]]:
    """Map each dropped id to (surviving id, Jaccard).

    Candidates come from MinHash LSH; each pair is confirmed by exact Jaccard. Confirmed pairs
    form clusters (connected components); the member with the smallest ``order`` survives.
    """
    lsh = MinHashLSH(threshold=threshold, num_perm=num_perm)
    sigs: dict[str, MinHash] = {}
    by_id = {d.id: d for d in docs}
    for d in docs:
        if not d.shingles:
            continue
        sigs[d.id] = minhash(d.shingles, num_perm)
        lsh.insert(d.id, sigs[d.id])
    parent = {d.id: d.id for d in docs}

    def find(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    best: dict[str, tuple[str, float]] = {}
    for doc_id, sig in sigs.items():
        for other in lsh.query(sig):
            if other <= doc_id:
                continue
            score = jaccard(by_id[doc_id].shingles, by_id[other].shingles)
            if score >= threshold:
                ra, rb = find(doc_id), find(other)
                if ra != rb:
                    parent[max(ra, rb)] = min(ra, rb)
                for a, b in ((doc_id, other), (other, doc_id)):
                    if score > best.get(a, ("", -1.0))[1]:
                        best[a] = (b, score)
    clusters: dict[str, list[DocShingles]] = {}
    for d in docs:
        clusters.setdefault(find(d.id), []).append(d)
    dropped: dict[str, tuple[str, float]] = {}
    for members in clusters.values():
        if len(members) < 2:
            continue
        survivor = min(members, key=lambda d: d.order)
        for m in members:
            if m.id != survivor.id:
                score = jaccard(m.shingles, survivor.shingles)
                dropped[m.id] = (survivor.id, round(max(score, best.get(m.id, ("", 0.0))[1]), 4))
    return dropped
