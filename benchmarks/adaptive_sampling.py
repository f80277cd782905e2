"""Adaptive sampling against a fixed K=16: samples used and labels that differ, one run.

Tasks (each with a true pass probability p):

- synthetic, ``--tasks`` of them, a spread with many tasks near 0 and 1: 30% p = 0, 15%
  p ~ Beta(0.5, 20) (mean 0.024), 15% p = 1, 10% p ~ Beta(20, 0.5), 30% p ~ Beta(1.2, 1.2);
- the replay set (examples/replay, 36 tasks of all four families): each recorded completion
  verified once by the real verifiers; p is the task's fraction of passing completions and
  a sample is a draw from its recorded ones (``--no-replay`` skips the verification).

Each task gets one seeded stream of 16 pass/fail outcomes. The fixed run labels it from all
16; the adaptive run (``transforms.adaptive``) reads the same stream from the start and stops
when its label is settled, so a difference in labels is a label the adaptive rule settled
too early, never sampling noise between the two. Rows: band, rule (``streak``: settle an
unbroken run of passes or failures after that many samples; ``none``: never), samples per
task, the saving against 16 and the share of labels that differ.

    python -m benchmarks.adaptive_sampling --tasks 4000 --seed 0
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from benchmarks.timing import command_line
from transforms.adaptive import AdaptiveConfig, sample_adaptively
from transforms.stats import BandConfig

K = 16
ROOT = Path(__file__).resolve().parents[1]


def synthetic(n: int, rng: random.Random) -> list[float]:
    """True pass probabilities from the spread in the module docstring."""
    out = []
    for _ in range(n):
        u = rng.random()
        if u < 0.30:
            out.append(0.0)
        elif u < 0.45:
            out.append(rng.betavariate(0.5, 20))
        elif u < 0.60:
            out.append(1.0)
        elif u < 0.70:
            out.append(rng.betavariate(20, 0.5))
        else:
            out.append(rng.betavariate(1.2, 1.2))
    return out


def replay_pass_rates() -> list[float]:
    """Per replay task, the fraction of its recorded completions the verifier passes."""
    import json

    from schemas import CodeSpec, TaskRecord
    from transforms.samplers import extract_solution
    from verifiers import get_verifier, make_sandbox

    tasks: dict[str, TaskRecord] = {}
    for path in sorted((ROOT / "examples" / "tasks").glob("*.jsonl")):
        for line in path.read_text().splitlines():
            try:
                t = TaskRecord.model_validate_json(line)
            except ValueError:
                continue  # the examples include malformed records on purpose
            tasks[t.id] = t
    recorded: dict[str, list[str]] = {}
    for line in (ROOT / "examples" / "replay" / "completions.jsonl").read_text().splitlines():
        row = json.loads(line)
        recorded.setdefault(row["task_id"], []).append(row["completion"])
    sandbox = make_sandbox("process", allow_weak_isolation=True)
    rates = []
    try:
        for tid, comps in sorted(recorded.items()):
            task = tasks.get(tid)
            if task is None:
                continue
            verifier = get_verifier(task.family, sandbox)
            entry = task.verifier.entry_point if isinstance(task.verifier, CodeSpec) else None
            passed = [
                verifier.verify(task, extract_solution(c, task.family, entry)).passed for c in comps
            ]
            rates.append(sum(passed) / len(passed))
    finally:
        sandbox.close()
    return rates


@dataclass(frozen=True)
class Row:
    population: str
    band: str
    rule: str
    per_task: float
    saving: float
    differ: float


def _prefix(stream: list[bool]) -> Callable[[int, int], list[bool]]:
    return lambda start, count: stream[start : start + count]


def compare(
    name: str, ps: list[float], band: BandConfig, cfg: AdaptiveConfig, rng: random.Random
) -> Row:
    """Fixed K=16 against ``cfg`` on one seeded stream per task."""
    used = differ = 0
    for p in ps:
        stream = [rng.random() < p for _ in range(K)]
        fixed = band.classify(sum(stream) / K)
        out = sample_adaptively(_prefix(stream), band, cfg)
        used += out.n
        differ += out.label != fixed
    rule = "none" if cfg.streak is None else f"streak {cfg.streak}"
    band_text = f"({band.too_hard:g}, {band.too_easy:g})"
    return Row(name, band_text, rule, used / len(ps), 1 - used / (K * len(ps)), differ / len(ps))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=4000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-replay", action="store_true")
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    populations = {"synthetic": synthetic(args.tasks, rng)}
    if not args.no_replay:
        populations["replay set"] = replay_pass_rates()
    print(command_line("benchmarks.adaptive_sampling"))
    rows = []
    for name, ps in populations.items():
        for band in (BandConfig(), BandConfig(0.1, 0.9)):
            for streak in (None, 12, 8, 4):
                cfg = AdaptiveConfig(max_samples=K, first_round=4, round_size=4, streak=streak)
                rows.append(compare(name, ps, band, cfg, random.Random(args.seed + 1)))
    print("\n| tasks | band | rule | samples/task | saving vs K=16 | labels differing |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r.population} ({len(populations[r.population])}) | {r.band} | {r.rule} "
            f"| {r.per_task:.2f} | {r.saving:.1%} | {r.differ:.2%} |"
        )
    goal = [r for r in rows if r.saving >= 0.40 and r.differ <= 0.02]
    print(
        "\ngoal (>= 40% fewer samples, <= 2% differing labels) met by: "
        + (", ".join(f"{r.population} {r.band} {r.rule}" for r in goal) or "none")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
