"""The CPU sampler's decode loop against transformers' ``generate``, on the demo's prompts.

One process loads the bundled model once and draws the same samples (the same tasks, K, seeds,
temperature, token cap and the stop at the closed code fence) with each setup, order rotated
each round:

- ``generate/4``: the sampler before this change: ``model.generate`` over K copies of each
  prompt, batches of 4 tasks (the old ``batch_size``; Beam's adaptive batching often made them
  smaller), every row running until the batch's last row ends;
- ``loop/4``: ``samplers.decode`` at the same batch (one prefill per prompt, finished rows
  dropped, the cache written in place);
- ``loop/8``: the same at the new default of 8 tasks per call, as ``curate`` now batches.

Prompts are the ones the pipeline sends: the chat template over the family's instruction and
the task's prompt, repository tasks with the file listing of their snapshot (what the gates
add). Every round counts the completions a setup drew unlike the first setup's (float rounding
of another batch shape can flip a near tie; more than one in twenty is exit status 1) and
prints wall time, process CPU, tokens and completions per CPU-second; ratios are to
``generate/4``.

    python -m benchmarks.sampler_decode --per-family 4 --rounds 2
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.timing import command_line, median, rotated, run_reported
from tasksieve.transforms.samplers import SamplerConfig, SampleRequest
from tasksieve.transforms.samplers.hf import TransformersModelHandler
from tasksieve.verifiers.families.repo.prompt import LISTING_KEY, file_listing, render_prompt
from tasksieve.verifiers.families.repo.snapshots import SnapshotStore

ROOT = Path(__file__).resolve().parents[1]
FAMILIES = ("code", "sql", "config", "api", "repo")
SETUPS = {"generate/4": ("generate", 4), "loop/4": ("loop", 4), "loop/8": ("loop", 8)}


def requests(per_family: int, families: tuple[str, ...]) -> list[SampleRequest]:
    """The first ``per_family`` example tasks of each family, as the pipeline prompts them."""
    from tasksieve.schemas import TaskRecord

    store = SnapshotStore(ROOT / "examples" / "snapshots")
    out: list[SampleRequest] = []
    for family in families:
        lines = (ROOT / "examples" / "tasks" / f"{family}.jsonl").read_text().splitlines()
        for line in [x for x in lines if x.strip()][:per_family]:
            task = TaskRecord.model_validate(json.loads(line))
            if family == "repo":
                tree = store.path(task.verifier.snapshot)  # type: ignore[union-attr]
                meta = {**task.metadata, LISTING_KEY: file_listing(tree)}
                task = task.model_copy(update={"metadata": meta})
            entry = getattr(task.verifier, "entry_point", None)
            out.append(SampleRequest(task.id, family, render_prompt(task), entry))
    return out


def parser(doc: str, per_family: int) -> argparse.ArgumentParser:
    """The flags the sampler benchmarks share: which prompts, how many samples, the rounds."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument(
        "--per-family", type=int, default=per_family, help=f"tasks per family ({per_family})"
    )
    p.add_argument("--families", default=",".join(FAMILIES), help="comma-separated families")
    p.add_argument("--samples", type=int, default=4, help="K per task (default 4, as curate)")
    p.add_argument("--max-new-tokens", type=int, default=256)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--json", help="write the figures here")
    return p


@dataclass
class Run:
    wall: float
    cpu: float
    tokens: int
    texts: list[str]


def draw(setup: str, reqs: list[SampleRequest], model: Any, args: argparse.Namespace) -> Run:
    decode, size = SETUPS[setup]
    cfg = SamplerConfig(
        samples=args.samples, batch_size=size, max_new_tokens=args.max_new_tokens, seed=args.seed
    )
    handler = TransformersModelHandler(cfg, decode=decode)
    wall, cpu = time.perf_counter(), time.process_time()
    texts, tokens = [], 0
    for i in range(0, len(reqs), size):
        for comps, metas in handler.draw(reqs[i : i + size], model):
            texts += comps
            # generate pads a finished row with the end token, which the count cannot tell
            # from a real one; the loop's rows hold no padding
            tokens += sum(m.completion_tokens or 0 for m in metas)
    return Run(time.perf_counter() - wall, time.process_time() - cpu, tokens, texts)


def main() -> int:
    p = parser(__doc__ or "", per_family=4)
    p.add_argument("--setups", default=",".join(SETUPS), help="comma-separated setups")
    args = p.parse_args()
    print(command_line("benchmarks.sampler_decode"))
    setups = args.setups.split(",")
    reqs = requests(args.per_family, tuple(args.families.split(",")))
    model = TransformersModelHandler(SamplerConfig()).load_model()
    print(f"{len(reqs)} tasks x {args.samples} samples, up to {args.max_new_tokens} tokens")
    runs: dict[str, list[Run]] = {s: [] for s in setups}
    differ = 0
    for r in range(args.rounds):
        for setup in rotated(setups, r):
            run = draw(setup, reqs, model, args)
            runs[setup].append(run)
            print(
                f"round {r + 1} {setup:>10}: wall {run.wall:7.1f} s  cpu {run.cpu:7.1f} s  "
                f"{run.tokens} tokens",
                flush=True,
            )
        first = runs[setups[0]][-1].texts
        for setup in setups[1:]:
            diff = sum(a != b for a, b in zip(first, runs[setup][-1].texts, strict=True))
            differ = max(differ, diff)
            if diff:
                print(f"round {r + 1}: {setup} drew {diff} completions unlike {setups[0]}")
    base = median([x.cpu for x in runs[setups[0]]])
    base_wall = median([x.wall for x in runs[setups[0]]])
    n = len(reqs) * args.samples
    figures = {}
    print(f"\n{'setup':>10} | wall s | CPU s | completions/CPU-s | CPU ratio | wall ratio")
    for setup in setups:
        cpu = median([x.cpu for x in runs[setup]])
        wall = median([x.wall for x in runs[setup]])
        figures[setup] = {"wall_s": wall, "cpu_s": cpu, "completions": n}
        print(
            f"{setup:>10} | {wall:6.1f} | {cpu:5.1f} | {n / cpu:17.2f} | "
            f"{base / cpu:8.2f}x | {base_wall / wall:9.2f}x"
        )
    print(f"completions unlike {setups[0]}'s: at most {differ} of {n} in a round")
    if args.json:
        Path(args.json).write_text(json.dumps({"setups": figures, "differ": differ}, indent=2))
    return 0 if differ * 20 <= n else 1


if __name__ == "__main__":
    sys.exit(run_reported(main))
