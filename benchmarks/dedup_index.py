"""Near-dedup against a persisted index: the per-worker lookup against the shuffle of the history.

    PYTHONPATH=. .venv/bin/python -m benchmarks.dedup_index --history 100000 --new 1000

An index of ``--history`` generated tasks (random word prompts, 40-80 words from a 5,000-word
vocabulary), written as ``--parts`` parts (one per earlier run), and ``--new`` candidates, a
tenth of them near copies of indexed tasks (two words changed), the rest fresh. Both ways
run ``transforms.dedup.near.NearDedup`` on Beam's DirectRunner (in memory, one worker) over the
same candidates and index:

  shuffle  ``index_lookup="shuffle"``: the index entries join the band GroupByKey and both
           exact-Jaccard CoGroupByKeys, as before the lookup existed (the named baseline);
  worker   ``index_lookup="worker"``: each worker loads the index once and looks each
           candidate up (``transforms.dedup.index_lookup``); only the candidates are shuffled.

Every round runs both in the same order; the ratio is per round. The two must drop the same
candidates (checked). Also reported: the time to load the index into one worker, its bytes
in memory per entry, and the time to compact the parts into one (``dedup-index compact``)
and the worker lookup over the compacted index.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.timing import run_reported
from tasksieve.transforms.algorithms.minhash import MinHasher
from tasksieve.transforms.dedup.index_compact import compact_index
from tasksieve.transforms.dedup.index_lookup import LoadedIndex
from tasksieve.transforms.dedup.index_store import index_files, write_index_part
from tasksieve.transforms.dedup.near import DedupConfig


def vocabulary(size: int = 5000) -> list[str]:
    rng = random.Random(7)
    letters = "abcdefghijklmnopqrstuvwxyz"
    return sorted({"".join(rng.choices(letters, k=rng.randint(3, 9))) for _ in range(size)})


def prompt(rng: random.Random, vocab: list[str]) -> list[str]:
    return rng.choices(vocab, k=rng.randint(40, 80))


def corpus(history: int, new: int, seed: int = 1) -> tuple[list[str], list[str], set[int]]:
    """History prompts, candidate prompts, and which candidates are near copies."""
    rng = random.Random(seed)
    vocab = vocabulary()
    hist = [prompt(rng, vocab) for _ in range(history)]
    cands, planted = [], set()
    for i in range(new):
        if i % 10 == 0:
            words = list(rng.choice(hist))
            for pos in rng.sample(range(len(words)), 2):
                words[pos] = rng.choice(vocab)
            planted.add(i)
        else:
            words = prompt(rng, vocab)
        cands.append(words)
    return [" ".join(w) for w in hist], [" ".join(w) for w in cands], planted


def build_index(path: str, texts: list[str], parts: int, cfg: DedupConfig) -> None:
    hasher = MinHasher(cfg.num_perm, cfg.seed)
    step = -(-len(texts) // parts)
    for p in range(parts):
        chunk = texts[p * step : (p + 1) * step]
        ids = [f"h{p * step + i:07d}" for i in range(len(chunk))]
        write_index_part(
            path, cfg.index_settings(), ids, [f"run:{p}"] * len(ids), chunk, hasher, cfg.shingle()
        )


def dropped(texts: list[str], cfg: DedupConfig) -> set[int]:
    """Run NearDedup on the DirectRunner; the indices of the dropped candidates."""
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

    from benchmarks.dedup import _items
    from tasksieve.transforms.dedup.near import NearDedup

    opts = PipelineOptions(["--direct_num_workers=1", "--direct_running_mode=in_memory"])
    with tempfile.TemporaryDirectory() as tmp:
        with beam.Pipeline(options=opts) as p:
            out = p | beam.Create(_items(texts), reshuffle=False) | NearDedup(cfg, "bench")
            ids = out["rejected"] | beam.Map(lambda r: r["record_id"])
            _ = ids | beam.io.WriteToText(f"{tmp}/dropped")
        lines = [x for f in Path(tmp).glob("dropped*") for x in f.read_text().split()]
    return {int(x[1:]) for x in lines}


def index_bytes(index: LoadedIndex) -> int:
    arrays = [index.flat, index.starts, index.counts, *index.band_hashes, *index.band_rows]
    return sum(a.nbytes for a in arrays)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--history", type=int, default=100_000, help="indexed tasks")
    ap.add_argument("--new", type=int, default=1000, help="candidate tasks")
    ap.add_argument("--parts", type=int, default=20, help="index parts (earlier runs)")
    ap.add_argument("--repeat", type=int, default=2, help="timed rounds")
    args = ap.parse_args(argv)
    hist, cands, planted = corpus(args.history, args.new)
    with tempfile.TemporaryDirectory() as tmp:
        cfg = DedupConfig(index_path=f"{tmp}/idx")
        t0 = time.perf_counter()
        build_index(cfg.index_path or "", hist, args.parts, cfg)
        print(
            f"index: {args.history} tasks in {args.parts} parts (built in "
            f"{time.perf_counter() - t0:.1f}s); {args.new} candidates, "
            f"{len(planted)} planted copies"
        )
        t0 = time.perf_counter()
        loaded = LoadedIndex(index_files(cfg.index_path or ""), cfg.banding())
        load_s = time.perf_counter() - t0
        print(
            f"worker load: {load_s:.2f}s, {index_bytes(loaded) / loaded.entries:.0f} bytes per "
            f"entry in memory ({index_bytes(loaded) / 1e6:.1f} MB)"
        )
        ways = {"shuffle": dataclasses_replace(cfg, "shuffle"), "worker": cfg}
        secs: dict[str, list[float]] = {w: [] for w in ways}
        found: dict[str, set[int]] = {}
        for _ in range(args.repeat):
            for way, c in ways.items():
                t0 = time.perf_counter()
                found[way] = dropped(cands, c)
                secs[way].append(time.perf_counter() - t0)
                print(f"  {way:8} {secs[way][-1]:8.1f}s  dropped {len(found[way])}", flush=True)
        same = found["shuffle"] == found["worker"]
        print(
            f"dropped: shuffle {len(found['shuffle'])}, worker {len(found['worker'])}, "
            f"identical: {same}; planted copies caught: {len(found['worker'] & planted)}/"
            f"{len(planted)}"
        )
        ratios = [s / w for s, w in zip(secs["shuffle"], secs["worker"], strict=True)]
        print(
            f"time shuffle / worker, per round: {', '.join(f'{r:.1f}x' for r in ratios)} "
            f"(best: shuffle {min(secs['shuffle']):.1f}s, worker {min(secs['worker']):.1f}s)"
        )
        t0 = time.perf_counter()
        merged, rows, _ = compact_index(cfg.index_path or "")
        compact_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        after = dropped(cands, cfg)
        print(
            f"compaction: {merged} parts -> 1 ({rows} rows) in {compact_s:.1f}s; worker lookup "
            f"after it {time.perf_counter() - t0:.1f}s, same drops: {after == found['worker']}"
        )


def dataclasses_replace(cfg: DedupConfig, lookup: str) -> DedupConfig:
    import dataclasses

    return dataclasses.replace(cfg, index_lookup=lookup)


if __name__ == "__main__":
    sys.exit(run_reported(main))
