"""The CPU sampler in bfloat16 against float32, on the demo's prompts.

One process loads the bundled model twice, once per number format, and draws the same samples
with each (the same tasks, K, seeds, temperature, token cap, the stop at the closed code fence,
the decode loop at curate's batch of 8 tasks), the order rotated each round:

- ``float32``: the sampler before ``samplers.precision`` (and ``--dtype float32`` now);
- ``bfloat16``: what ``--dtype auto`` picks on a CPU with bfloat16 units.

Prompts are the pipeline's (``benchmarks.sampler_decode.requests``). Each round prints wall
time, process CPU and the tokens drawn, and checks its completions against the same format's
first round (a format must repeat its own samples; any change is exit status 1). The summary
gives the medians, completions per CPU-second, the ratios to float32, and two checks that
bfloat16 still answers the prompts: the share of completions that close a fenced code block
(what the extractor takes a solution from) and the mean completion length. The samples of the
two formats differ (see the module ``samplers.precision``); whether the pipeline decides the
same is ``benchmarks.demo_rows --decisions`` on two demo outputs.

    python -m benchmarks.sampler_dtype --per-family 2 --rounds 2
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.sampler_decode import Run, parser, requests
from benchmarks.timing import command_line, median, rotated, run_reported
from tasksieve.transforms.samplers import SamplerConfig, SampleRequest
from tasksieve.transforms.samplers.hf import TransformersModelHandler

DTYPES = ("float32", "bfloat16")


def draw(dtype: str, reqs: list[SampleRequest], model: Any, args: argparse.Namespace) -> Run:
    """Every request's K samples in batches of 8 tasks, as curate draws them."""
    cfg = SamplerConfig(
        samples=args.samples, max_new_tokens=args.max_new_tokens, seed=args.seed, dtype=dtype
    )
    handler = TransformersModelHandler(cfg)
    wall, cpu = time.perf_counter(), time.process_time()
    texts, tokens = [], 0
    for i in range(0, len(reqs), cfg.batch_size):
        for comps, metas in handler.draw(reqs[i : i + cfg.batch_size], model):
            texts += comps
            tokens += sum(m.completion_tokens or 0 for m in metas)
    return Run(time.perf_counter() - wall, time.process_time() - cpu, tokens, texts)


def main() -> int:
    args = parser(__doc__ or "", per_family=2).parse_args()
    print(command_line("benchmarks.sampler_dtype"))
    reqs = requests(args.per_family, tuple(args.families.split(",")))
    models = {d: TransformersModelHandler(SamplerConfig(dtype=d)).load_model() for d in DTYPES}
    n = len(reqs) * args.samples
    print(f"{len(reqs)} tasks x {args.samples} samples, up to {args.max_new_tokens} tokens")
    runs: dict[str, list[Run]] = {d: [] for d in DTYPES}
    changed = 0  # rounds whose completions differ from the same format's first round
    for r in range(args.rounds):
        for dtype in rotated(DTYPES, r):
            run = draw(dtype, reqs, models[dtype], args)
            runs[dtype].append(run)
            print(
                f"round {r + 1} {dtype:>8}: wall {run.wall:6.1f} s  cpu {run.cpu:6.1f} s  "
                f"{run.tokens} tokens",
                flush=True,
            )
            if run.texts != runs[dtype][0].texts:  # a format must repeat its own samples
                changed += 1
                print(f"round {r + 1} {dtype}: completions unlike its first round's")
    base_cpu = median([x.cpu for x in runs["float32"]])
    base_wall = median([x.wall for x in runs["float32"]])
    figures = {}
    print(
        f"\n{'dtype':>8} | wall s | CPU s | completions/CPU-s | tokens/s | CPU ratio | "
        "wall ratio | closed fence | mean tokens"
    )
    for dtype in DTYPES:
        cpu = median([x.cpu for x in runs[dtype]])
        wall = median([x.wall for x in runs[dtype]])
        first = runs[dtype][0]
        fenced = sum(t.count("```") >= 2 for t in first.texts) / n
        figures[dtype] = {
            "wall_s": wall,
            "cpu_s": cpu,
            "completions": n,
            "tokens": first.tokens,
            "closed_fence": fenced,
        }
        print(
            f"{dtype:>8} | {wall:6.1f} | {cpu:5.1f} | {n / cpu:17.2f} | "
            f"{first.tokens / wall:8.1f} | {base_cpu / cpu:8.2f}x | {base_wall / wall:9.2f}x | "
            f"{fenced:12.2f} | {first.tokens / n:11.1f}"
        )
    same = sum(
        a == b for a, b in zip(runs["float32"][0].texts, runs["bfloat16"][0].texts, strict=True)
    )
    print(f"completions identical in both formats: {same} of {n}")
    if args.json:
        Path(args.json).write_text(json.dumps({"dtypes": figures, "identical": same}, indent=2))
    print(f"rounds unlike their format's first: {changed}")
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(run_reported(main))
