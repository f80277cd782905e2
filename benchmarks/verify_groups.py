"""Batch verify of K samples per task: ``--group K`` (one entry per task's run) vs ``--group 1``.

Workload: every code example task's reference solution, ``--samples K`` times in a row (the
shape of a sample file: a task's samples next to each other), as a JSONL of ``{task_id,
solution}`` rows. Both sides are ``tasksieve verify --solutions`` from this checkout with the
same ``--jobs``; one groups a task's consecutive samples into one multi-sample sandbox entry
(the default), the other verifies each alone (the path before). They alternate over
``--rounds`` in the same run; the figure is the median wall time of each and their ratio, and
their verdict statuses must agree (a disagreement aborts the benchmark).

    .venv/bin/python -m benchmarks.verify_groups --samples 8 --jobs 2 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.timing import run_reported

ROOT = Path(__file__).resolve().parent.parent
TASKS = ROOT / "examples" / "tasks" / "code.jsonl"
CLI = [sys.executable, "-m", "tasksieve.pipeline.cli", "verify"]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def workload(samples: int, work: Path) -> Path:
    """The solutions file: each task's reference ``samples`` times in a row."""
    rows = []
    for line in TASKS.read_text().splitlines():
        if line.strip():
            task = json.loads(line)
            rows += [{"task_id": task["id"], "solution": task["reference_solution"]}] * samples
    sols = work / "solutions.jsonl"
    sols.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return sols


def run(sols: Path, jobs: int, group: int) -> tuple[float, list[str]]:
    argv = [*CLI, "--task", str(TASKS), "--solutions", str(sols), "-j", str(jobs)]
    start = time.perf_counter()
    proc = subprocess.run(
        [*argv, "--group", str(group)], cwd=ROOT, env=ENV, capture_output=True, text=True,
        timeout=1800,
    )  # fmt: skip
    took = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise SystemExit(f"--group {group}: exit {proc.returncode}\n{proc.stderr[-2000:]}")
    return took, [json.loads(line)["status"] for line in proc.stdout.splitlines()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=8, help="samples per task, K (default 8)")
    ap.add_argument("--jobs", type=int, default=2, help="--jobs of both sides (default 2)")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds (default 3)")
    args = ap.parse_args(argv)
    grouped: list[float] = []
    alone: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        sols = workload(args.samples, Path(tmp))
        for _ in range(args.rounds):
            took, got = run(sols, args.jobs, args.samples)
            grouped.append(took)
            took, want = run(sols, args.jobs, 1)
            alone.append(took)
            if got != want:
                raise SystemExit(f"verdicts differ: grouped {got} vs alone {want}")
    n = len(got)
    g, a = statistics.median(grouped), statistics.median(alone)
    counts = {s: got.count(s) for s in sorted(set(got))}
    print(f"{n} solutions, {args.samples} per task, --jobs {args.jobs}, {args.rounds} rounds")
    print(f"statuses agree: {counts}")
    print(f"--group 1 (each alone)      {a:8.2f} s  ({n / a:6.2f} solutions/s)")
    print(f"--group {args.samples:<3d}(a task's run) {g:8.2f} s  ({n / g:6.2f} solutions/s)")
    print(f"speed-up (alone / grouped): {a / g:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(run_reported(main))
