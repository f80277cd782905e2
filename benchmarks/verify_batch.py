"""Batch verify: ``tasksieve verify --solutions`` against one ``tasksieve verify`` per solution.

Workload: the reference solutions of the example tasks (code, sql and config by default;
``--families code,sql,config,api`` adds the API tasks, whose moto start-up dominates),
repeated ``--repeat`` times, as a JSONL of ``{task_id, solution}`` rows against one task file
holding every task. Batch: one process, one warm sandbox, ``--jobs N``. Baseline: one
``tasksieve verify --task-id ID --solution FILE`` process per solution, ``N`` at a time (like
``xargs -P N``), so both sides use the same parallelism. Both run from this checkout
(``python -m tasksieve.pipeline.cli``) in the same run, batch and baseline alternating over
``--rounds``; the figure is the median wall time of each and their ratio. The verdict
statuses of the two must agree (a disagreement aborts the benchmark).

    .venv/bin/python -m benchmarks.verify_batch --jobs 2 --rounds 3
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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from benchmarks.timing import run_reported

ROOT = Path(__file__).resolve().parent.parent
TASKS = ROOT / "examples" / "tasks"
CLI = [sys.executable, "-m", "tasksieve.pipeline.cli", "verify"]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def workload(families: list[str], repeat: int, work: Path) -> tuple[Path, Path, list[str]]:
    """Write the task file, the solutions JSONL and one file per solution; return them."""
    task_lines: list[str] = []
    rows: list[dict[str, str]] = []
    for family in families:
        for line in (TASKS / f"{family}.jsonl").read_text().splitlines():
            if line.strip():
                task_lines.append(line)
                task = json.loads(line)
                rows.append({"task_id": task["id"], "solution": task["reference_solution"]})
    rows = rows * repeat
    tasks = work / "tasks.jsonl"
    tasks.write_text("\n".join(task_lines) + "\n")
    sols = work / "solutions.jsonl"
    sols.write_text("".join(json.dumps(r) + "\n" for r in rows))
    files = []
    for i, row in enumerate(rows):
        f = work / f"sol{i:04d}.txt"
        f.write_text(row["solution"])
        files.append(str(f))
    ids = [r["task_id"] for r in rows]
    return tasks, sols, [f"{tid}\t{f}" for tid, f in zip(ids, files, strict=True)]


def run_batch(tasks: Path, sols: Path, jobs: int) -> tuple[float, list[str]]:
    argv = [*CLI, "--task", str(tasks), "--solutions", str(sols), "--jobs", str(jobs)]
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=1800)
    took = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise SystemExit(f"batch: exit {proc.returncode}\n{proc.stderr[-2000:]}")
    return took, [json.loads(line)["status"] for line in proc.stdout.splitlines()]


def _one(tasks: Path, item: str) -> str:
    tid, path = item.split("\t")
    argv = [*CLI, "--task", str(tasks), "--task-id", tid, "--solution", path]
    proc = subprocess.run(argv, cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=600)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{tid}: exit {proc.returncode}\n{proc.stderr[-2000:]}")
    status: str = json.loads(proc.stdout)["status"]
    return status


def run_per_process(tasks: Path, items: list[str], jobs: int) -> tuple[float, list[str]]:
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        statuses = list(pool.map(lambda item: _one(tasks, item), items))
    return time.perf_counter() - start, statuses


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=2, help="parallelism of both sides (default 2)")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds (default 3)")
    ap.add_argument("--repeat", type=int, default=1, help="copies of the workload (default 1)")
    ap.add_argument(
        "--families", default="code,sql,config", help="comma-separated (default code,sql,config)"
    )
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tasks, sols, items = workload(args.families.split(","), args.repeat, Path(tmp))
        batch: list[float] = []
        single: list[float] = []
        for _ in range(args.rounds):
            took, got = run_batch(tasks, sols, args.jobs)
            batch.append(took)
            took, want = run_per_process(tasks, items, args.jobs)
            single.append(took)
            if got != want:
                raise SystemExit(f"verdicts differ: batch {got} vs per-process {want}")
    b, s = statistics.median(batch), statistics.median(single)
    print(
        f"{len(items)} solutions ({args.families}), --jobs {args.jobs}, {args.rounds} rounds, "
        f"{os.cpu_count()} CPUs; statuses agree: {dict(sorted(_count(got).items()))}"
    )
    print(f"one process per solution  {s:8.2f} s  ({len(items) / s:6.2f} solutions/s)")
    print(f"verify --solutions        {b:8.2f} s  ({len(items) / b:6.2f} solutions/s)")
    print(f"speed-up (per-process / batch): {s / b:.1f}x")


def _count(statuses: list[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for s in statuses:
        out[s] = out.get(s, 0) + 1
    return out


if __name__ == "__main__":
    sys.exit(run_reported(main))
