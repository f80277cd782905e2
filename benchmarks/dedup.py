"""Near-dedup and decontamination benchmark: ours against datasketch, on one generated corpus.

    .venv/bin/python -m benchmarks.dedup --docs 20000 --num-perm 128

The generator writes code and prose tasks; about a third get planted variants (identifier
renames, reformatting, reordering, token edits of varying size) plus template distractors
that share half their text. Ground truth is exact Jaccard on the shingles: every pair inside
a planted family, and every pair any method reports, is measured exactly (independent random
documents share no word trigrams, which the run checks on a sample).

Methods, same shingles (word 3-grams of the normalised text) and permutations:
  (1) datasketch as commonly used: ``MinHash.update`` per shingle, ``MinHashLSH`` with its
      automatic banding, LSH output taken as the duplicate pairs;
  (2) datasketch ``MinHash.bulk`` into the same LSH;
  (3) ours: batched shingle hashing, vectorised MinHash, banding from the threshold, exact
      Jaccard confirmation (the plain functions the Beam DoFns call).
Throughput is documents per second from text to confirmed pairs. Peak memory is measured in
a second pass under tracemalloc (numpy buffers included) and scaled to a million documents.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from transforms.minhash import EMPTY, MinHasher, band_keys, candidate_pairs, choose_banding, explain
from transforms.neardup import confirm_flat
from transforms.textsim import ShingleConfig, jaccard, shingle_hashes_flat, shingles

Pairs = set[tuple[int, int]]
SYLL = ["ka", "lo", "mi", "ren", "tu", "sa", "vel", "po", "dri", "an", "ex", "or", "qui", "zen"]


def _vocab(rng: random.Random, n: int) -> list[str]:
    return list(dict.fromkeys("".join(rng.choices(SYLL, k=rng.randint(2, 4))) for _ in range(n)))


@dataclass
class Corpus:
    texts: list[str]
    family: list[int]
    kinds: list[str]


def _prose(rng: random.Random, vocab: list[str], weights: list[float]) -> str:
    sents = []
    for _ in range(rng.randint(5, 12)):
        words = rng.choices(vocab, weights, k=rng.randint(8, 16))
        sents.append(" ".join(words).capitalize() + ".")
    return " ".join(sents)


def _code(rng: random.Random, vocab: list[str]) -> str:
    name = "_".join(rng.sample(vocab, 2))
    args = rng.sample(vocab, 3)
    lines = [f"def {name}({', '.join(args)}):", f'    """{" ".join(rng.sample(vocab, 8))}."""']
    for _ in range(rng.randint(6, 14)):
        v, w = rng.sample(vocab + args, 2)
        lines.append(
            rng.choice(
                [
                    f"    {v} = {w} + {rng.randint(0, 99)}",
                    f"    if {v} > {w}:",
                    f"        {v} -= 1",
                    f"    for {v} in range({w}):",
                    f"    {v}.append({w})",
                    f"    print({v}, {w})",
                ]
            )
        )
    lines.append(f"    return {args[0]}")
    return "\n".join(lines)


def _variant(rng: random.Random, text: str, kind: str, vocab: list[str]) -> tuple[str, str]:
    op = rng.choice(["rename", "reformat", "reorder", "edit", "edit", "edit"])
    parts = text.split("\n") if kind == "code" else text.split(". ")
    if op == "reformat":
        return ("\n\n".join(p.upper() if rng.random() < 0.3 else "  " + p for p in parts), op)
    if op == "reorder":
        i, j = rng.sample(range(1, len(parts)), 2)
        parts[i], parts[j] = parts[j], parts[i]
        return ("\n".join(parts) if kind == "code" else ". ".join(parts), op)
    words = text.split(" ")
    if op == "rename":
        old = rng.sample(sorted({w for w in words if w.isalpha()}), 2)
        return (" ".join(rng.choice(vocab) if w in old else w for w in words), op)
    for _ in range(rng.randint(1, max(2, len(words) // 12))):
        i = rng.randrange(len(words))
        words[i] = rng.choice(vocab)
    return (" ".join(words), op)


def make_corpus(n: int, seed: int = 7) -> Corpus:
    """``n`` documents: bases, planted variants and template distractors, shuffled."""
    rng = random.Random(seed)
    vocab = _vocab(rng, 4000)
    weights = [1 / (i + 1) ** 0.8 for i in range(len(vocab))]
    texts: list[str] = []
    family: list[int] = []
    kinds: list[str] = []
    fam = 0
    while len(texts) < n:
        kind = rng.choice(["code", "prose"])
        base = _code(rng, vocab) if kind == "code" else _prose(rng, vocab, weights)
        texts.append(base)
        family.append(fam)
        kinds.append(f"{kind}:base")
        roll = rng.random()
        if roll < 0.35:
            for _ in range(rng.randint(1, 3)):
                text, op = _variant(rng, base, kind, vocab)
                texts.append(text)
                family.append(fam)
                kinds.append(f"{kind}:{op}")
        elif roll < 0.45:
            half = base[: len(base) // 2]
            other = _code(rng, vocab) if kind == "code" else _prose(rng, vocab, weights)
            texts.append(half + "\n" + other[len(other) // 2 :])
            family.append(fam)
            kinds.append(f"{kind}:distractor")
        fam += 1
    order = list(range(n))
    rng.shuffle(order)
    return Corpus([texts[i] for i in order], [family[i] for i in order], [kinds[i] for i in order])


def ground_truth(c: Corpus, sh: list[frozenset[str]], threshold: float) -> tuple[Pairs, dict]:
    """Pairs at or above ``threshold`` (within families) and Jaccard of every family pair."""
    members: dict[int, list[int]] = {}
    for i, f in enumerate(c.family):
        members.setdefault(f, []).append(i)
    exact: dict[tuple[int, int], float] = {}
    for ms in members.values():
        for x in range(len(ms)):
            for y in range(x + 1, len(ms)):
                a, b = sorted((ms[x], ms[y]))
                exact[(a, b)] = jaccard(sh[a], sh[b])
    return {p for p, j in exact.items() if j >= threshold}, exact


def run_datasketch(
    texts: list[str], cfg: ShingleConfig, num_perm: int, t: float, bulk: bool
) -> Pairs:
    """Baselines (1) and (2): datasketch MinHash into MinHashLSH, LSH output as the pairs."""
    from datasketch import MinHash, MinHashLSH

    encoded = [[s.encode() for s in shingles(x, cfg)] for x in texts]
    if bulk:
        sigs = MinHash.bulk(encoded, num_perm=num_perm)
    else:
        sigs = []
        for doc in encoded:
            m = MinHash(num_perm=num_perm)
            for s in doc:
                m.update(s)
            sigs.append(m)
    lsh = MinHashLSH(threshold=t, num_perm=num_perm)
    for i, m in enumerate(sigs):
        lsh.insert(i, m)
    out: Pairs = set()
    for i, m in enumerate(sigs):
        for j in lsh.query(m):
            if j != i:
                out.add((min(i, j), max(i, j)))
    return out


def run_ours(
    texts: list[str], cfg: ShingleConfig, num_perm: int, t: float, batch: int = 4096
) -> Pairs:
    """Ours: batched hashing, one-permutation MinHash, banding, exact Jaccard confirmation."""
    hasher = MinHasher(num_perm)
    banding = choose_banding(t, num_perm)
    flats, counts, keys, empty = [], [], [], []
    for s in range(0, len(texts), batch):
        flat, count = shingle_hashes_flat(texts[s : s + batch], cfg)
        sigs = hasher.signatures_flat(flat, count)
        flats.append(flat)
        counts.append(count)
        keys.append(band_keys(sigs, banding))
        empty.append(sigs[:, 0] == EMPTY)
    pairs = candidate_pairs(np.concatenate(keys), empty=np.concatenate(empty))
    kept, _ = confirm_flat(pairs, np.concatenate(flats), np.concatenate(counts), t)
    return set(map(tuple, kept.tolist()))


def measure(fn: Callable[[list[str]], Pairs], texts: list[str]) -> tuple[Pairs, float]:
    """(pairs, docs/s) of one timed run."""
    t0 = time.perf_counter()
    pairs = fn(texts)
    return pairs, len(texts) / (time.perf_counter() - t0)


def peak_bytes(fn: Callable[[list[str]], Pairs], texts: list[str]) -> int:
    """Peak bytes allocated during ``fn(texts)`` under tracemalloc (numpy buffers included)."""
    tracemalloc.start()
    fn(texts)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def memory_growth(
    fn: Callable[[list[str]], Pairs], texts: list[str], sizes: tuple[int, int]
) -> tuple[float, float]:
    """(peak MB at the larger size, MB per million documents of growth between the sizes)."""
    lo, hi = (peak_bytes(fn, texts[:n]) for n in sizes)
    return hi / 1e6, (hi - lo) / (sizes[1] - sizes[0])


def decontam_recall(n_unrelated: list[str], seed: int = 3) -> dict[str, float]:
    """Recall on renamed+reworded HumanEval prompts; false-positive rate on unrelated tasks."""
    from transforms.contamination_sets import ContaminationIndex, humaneval_path, load_humaneval

    rng = random.Random(seed)
    index = ContaminationIndex(load_humaneval())
    with gzip.open(humaneval_path(), "rt") as fh:
        rows = [json.loads(line) for line in fh]
    swaps = {
        "Return": "Give back",
        "return": "give back",
        "list": "sequence",
        "given": "provided",
        "number": "value",
        "numbers": "values",
        "string": "text",
        "Given": "For",
    }
    hits = 0
    for r in rows:
        text = r["prompt"].replace(r["entry_point"], f"solve_{rng.randint(0, 999)}")
        for old, new in swaps.items():
            if rng.random() < 0.7:
                text = text.replace(old, new)
        text = text.replace("    ", "  ")
        found = index.check(text)
        hits += any(f.other_id == r["task_id"] for f in found)
    fps = sum(1 for t in n_unrelated if index.check(t))
    return {
        "recall": hits / len(rows),
        "n": len(rows),
        "false_positive_rate": fps / len(n_unrelated),
        "unrelated": len(n_unrelated),
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=20000)
    ap.add_argument("--num-perm", type=int, default=128)
    ap.add_argument("--threshold", type=float, default=0.8)
    ap.add_argument(
        "--mem-docs", type=int, default=5000, help="memory at this size and 4x it (0: skip)"
    )
    ap.add_argument("--repeat", type=int, default=3, help="timed rounds; best and min shown")
    ap.add_argument("--skip-update", action="store_true", help="skip baseline (1), the slow one")
    args = ap.parse_args(argv)
    cfg, t, p = ShingleConfig(), args.threshold, args.num_perm
    corpus = make_corpus(args.docs)
    sh = [shingles(x, cfg) for x in corpus.texts]
    truth, exact = ground_truth(corpus, sh, t)
    print(
        f"corpus: {args.docs} docs, {len(truth)} pairs with Jaccard >= {t}, "
        f"{sum(1 for j in exact.values() if 0.5 <= j < t)} family pairs in [0.5, {t})"
    )
    print(explain(choose_banding(t, p), t, p, "ours"))
    sizes = (args.mem_docs, 4 * args.mem_docs)
    mem_texts = make_corpus(sizes[1], seed=11).texts if args.mem_docs else []
    methods: list[tuple[str, Callable[[list[str]], Pairs]]] = [
        ("(1) datasketch update+LSH", lambda x: run_datasketch(x, cfg, p, t, bulk=False)),
        ("(2) datasketch bulk+LSH", lambda x: run_datasketch(x, cfg, p, t, bulk=True)),
        ("(3) ours", lambda x: run_ours(x, cfg, p, t)),
    ]
    if args.skip_update:
        methods = methods[1:]
    best: dict[str, float] = {}
    spread: dict[str, list[float]] = {}
    found: dict[str, Pairs] = {}
    for _ in range(args.repeat):
        for name, fn in methods:
            found[name], rate = measure(fn, corpus.texts)
            spread.setdefault(name, []).append(rate)
            best[name] = max(best.get(name, 0.0), rate)
    print(
        f"\n{'method':26} {'docs/s best':>11} {'min':>8} {'recall':>7} {'precision':>9} "
        f"{'peak MB @' + str(sizes[1]):>13} {'MB/1M docs':>10}"
    )
    for name, fn in methods:
        pairs = found[name]
        for pair in pairs - exact.keys():
            exact[pair] = jaccard(sh[pair[0]], sh[pair[1]])
        good = {q for q in pairs if exact[q] >= t}
        recall = len(good & truth) / max(1, len(truth))
        precision = len(good) / max(1, len(pairs))
        peak, per_m = memory_growth(fn, mem_texts, sizes) if mem_texts else (0.0, 0.0)
        print(
            f"{name:26} {best[name]:11.0f} {min(spread[name]):8.0f} {recall:7.4f} "
            f"{precision:9.4f} {peak:13.1f} {per_m:10.0f}"
        )
    ours = best["(3) ours"]
    for name, rate in best.items():
        if name != "(3) ours":
            ratios = [o / r for o, r in zip(spread["(3) ours"], spread[name], strict=True)]
            print(
                f"speed-up of ours over {name}: {ours / rate:.1f}x best/best, per round "
                + ", ".join(f"{x:.1f}x" for x in ratios)
            )
    print(
        f"memory: peak under tracemalloc at {sizes[0]} and {sizes[1]} docs; MB/1M docs is the "
        "growth between them scaled to a million (batch-bound buffers excluded)"
    )
    rng = random.Random(1)
    sample = [tuple(sorted(rng.sample(range(args.docs), 2))) for _ in range(20000)]
    stray = sum(
        1
        for a, b in sample
        if corpus.family[a] != corpus.family[b] and jaccard(sh[a], sh[b]) >= 0.3
    )
    print(f"check: {stray} of 20000 random cross-family pairs have Jaccard >= 0.3")
    dc = decontam_recall(corpus.texts[:2000])
    print(
        f"decontamination: HumanEval renamed+reworded recall {dc['recall']:.3f} "
        f"({int(dc['n'])} prompts); unrelated tasks flagged {dc['false_positive_rate']:.4f} "
        f"of {int(dc['unrelated'])}"
    )


if __name__ == "__main__":
    main()
