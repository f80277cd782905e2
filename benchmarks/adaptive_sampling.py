"""Adaptive sampling against a fixed K=16: samples used and labels that differ, one run.

Tasks (each with a true pass probability p):

- synthetic, ``--tasks`` of them, a spread with many tasks near 0 and 1: 30% p = 0, 15%
  p ~ Beta(0.5, 20) (mean 0.024), 15% p = 1, 10% p ~ Beta(20, 0.5), 30% p ~ Beta(1.2, 1.2);
- the replay set (examples/replay, 38 tasks of all four families): each recorded completion
  verified once by the real verifiers; p is the task's fraction of passing completions and
  a sample is a draw from its recorded ones (``--no-replay`` skips the verification).

Each task gets one seeded stream of 16 pass/fail outcomes (sample i is the same in both
runs, as in the pipeline, where samples are seeded by index). The fixed run labels it from
all 16; the adaptive run (``transforms.algorithms.adaptive_stopping``) reads the same stream from
the start and
stops when its label is settled, so "labels differing" counts the labels that stopping early
changed, never sampling noise between two runs. Two more yardsticks: "fixed K=16, rerun"
compares K=16 with a second K=16 run on fresh samples (how often K=16 itself flips a label),
and "labels off the true band" compares each label with the band of the true p.
Rules: ``streak S`` settles an unbroken run of passes or failures after S samples; ``none``
never does. The last line bounds what any rule can save on the default band (see
``stop_point_bound``). The rules in ``RULES`` were chosen on ``--seed 1000``; report
another seed:

    python -m benchmarks.adaptive_sampling --tasks 4000 --seed 2026
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from benchmarks.timing import command_line, overloaded, run_reported
from tasksieve.transforms.algorithms.adaptive_stopping import AdaptiveConfig, sample_adaptively
from tasksieve.transforms.algorithms.stats import BandConfig

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

    from tasksieve.schemas import CodeSpec, TaskRecord
    from tasksieve.transforms.samplers import extract_solution
    from tasksieve.verifiers import get_verifier, make_sandbox

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
    wrong: float


@dataclass(frozen=True)
class Rule:
    """One adaptive configuration of the table (rounds and streak)."""

    name: str
    first_round: int
    round_size: int
    streak: int | None

    def config(self) -> AdaptiveConfig:
        return AdaptiveConfig(K, self.first_round, self.round_size, streak=self.streak)


# Chosen on --seed 1000 (the tuning seed); the README's table is another seed.
RULES = (
    Rule("none", 4, 4, None),
    Rule("streak 12", 4, 4, 12),
    Rule("streak 8", 4, 4, 8),
    Rule("streak 4", 4, 4, 4),
    Rule("rounds of 2, streak 12", 2, 2, 12),
    Rule("rounds of 2, streak 8", 2, 2, 8),
)


def _prefix(stream: list[bool]) -> Callable[[int, int], list[bool]]:
    return lambda start, count: stream[start : start + count]


def streams(ps: list[float], rng: random.Random) -> list[list[bool]]:
    """One seeded stream of K pass/fail outcomes per task."""
    return [[rng.random() < p for _ in range(K)] for p in ps]


def _band_text(band: BandConfig) -> str:
    return f"({band.too_hard:g}, {band.too_easy:g})"


def compare(name: str, ps: list[float], band: BandConfig, rule: Rule, rng: random.Random) -> Row:
    """Fixed K=16 against ``rule`` on one seeded stream per task."""
    used = differ = wrong = 0
    for p, stream in zip(ps, streams(ps, rng), strict=True):
        fixed = band.classify(sum(stream) / K)
        out = sample_adaptively(_prefix(stream), band, rule.config())
        used += out.n
        differ += out.label != fixed
        wrong += out.label != band.classify(p)
    n, band_text = len(ps), _band_text(band)
    return Row(name, band_text, rule.name, used / n, 1 - used / (K * n), differ / n, wrong / n)


def rerun(name: str, ps: list[float], band: BandConfig, rng: random.Random) -> Row:
    """Fixed K=16 against a second fixed K=16 run on fresh samples (the noise floor)."""
    first, second = streams(ps, rng), streams(ps, rng)
    differ = wrong = 0
    for p, a, b in zip(ps, first, second, strict=True):
        label = band.classify(sum(a) / K)
        differ += label != band.classify(sum(b) / K)
        wrong += label != band.classify(p)
    n = len(ps)
    return Row(name, _band_text(band), "fixed K=16, rerun", K, 0.0, differ / n, wrong / n)


def stop_point_bound(ps: list[float], rng: random.Random, limit: float = 0.02) -> str:
    """The most any rule can save on the default band at <= ``limit`` differing labels.

    With the band (0, 1) a mixed task is settled for good, so a rule that sees only the
    task's own samples, one at a time, can only choose after how many unbroken failures
    (S0) and passes (S1) to stop. Every (S0, S1) is tried on these streams: an upper bound
    chosen on the very data it is measured on, not a rule.
    """
    first_break: list[tuple[bool, int]] = []  # first outcome, samples until the run breaks
    for stream in streams(ps, rng):
        m = next((i + 1 for i in range(1, K) if stream[i] != stream[0]), K + 1)
        first_break.append((stream[0], m))
    best = (0.0, 0.0, K, K)
    for s0 in range(1, K + 1):
        for s1 in range(1, K + 1):
            used = differ = 0
            for passed, m in first_break:
                stop = s1 if passed else s0
                used += min(m, stop)
                differ += stop < m <= K
            saving, share = 1 - used / (K * len(ps)), differ / len(ps)
            if share <= limit and saving > best[0]:
                best = (saving, share, s0, s1)
    saving, share, s0, s1 = best
    return (
        f"best stop points on band (0, 1), rounds of 1: stop after {s0} failures / {s1} "
        f"passes in a row: {saving:.1%} saved, {share:.2%} differing"
    )


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
            rows.append(rerun(name, ps, band, random.Random(args.seed + 1)))
            for rule in RULES:
                rows.append(compare(name, ps, band, rule, random.Random(args.seed + 1)))
    print(
        "\n| tasks | band | rule | samples/task | saving vs K=16 | labels differing "
        "| labels off the true band |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r.population} ({len(populations[r.population])}) | {r.band} | {r.rule} "
            f"| {r.per_task:.2f} | {r.saving:.1%} | {r.differ:.2%} | {r.wrong:.2%} |"
        )
    goal = [r for r in rows if r.saving >= 0.40 and r.differ <= 0.02]
    met = "met by: " + (", ".join(f"{r.population} {r.band} {r.rule}" for r in goal) or "none")
    print("\ngoal (>= 40% fewer samples, <= 2% differing labels) " + (overloaded() or met))
    print(stop_point_bound(populations["synthetic"], random.Random(args.seed + 1)))
    return 0


if __name__ == "__main__":
    sys.exit(run_reported(main))
