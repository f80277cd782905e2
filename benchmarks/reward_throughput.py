"""GRPO reward throughput: the trainer's reward function against two ways of verifying alone.

Workload: a GRPO-sized batch of ``--prompts`` HumanEval problems x ``--completions``
completions each (default 8 x 8 = 64), written as model replies (prose around a ```python
block). Per problem, half the completions hold its canonical solution and half a wrong one
(the canonical body behind an off-by-one or a None-returning wrapper, as in
``benchmarks.humaneval_jobs``), so each verdict is known by construction. Three ways, in one
run, alternating over ``--rounds``:

- ``reward_fn``: the trainer's reward function (``VerifierReward``), called as TRL calls it,
  which verifies the whole batch on a thread pool of ``--workers`` through one warm sandbox;
- ``in_process``: the same warm ``VerifierCache``, one completion after another;
- ``processes``: one ``tasksieve verify --solution`` process per completion, ``--workers`` at
  a time (so the parallelism matches ``reward_fn``).

Figures: completions (rewards) per second, median of the rounds, and ratios to
``reward_fn``. The verdicts of the three must be identical and as constructed (a mismatch
exits 1). ``--train-metrics FILE`` (a ``metrics.jsonl`` from ``tasksieve train``) adds the
share of each logged step spent in verification and in generation.

    .venv/bin/python -m benchmarks.reward_throughput --rounds 3 --workers 2
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
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from benchmarks.humaneval_jobs import problems, wrong_solution
from benchmarks.timing import command_line, machine_line, run_reported
from tasksieve.pipeline.train.rewards import BatchVerifier, RetryPolicy, VerifierReward, solution_of
from tasksieve.schemas import TaskRecord
from tasksieve.verifiers import SandboxConfig

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
CLI = [sys.executable, "-m", "tasksieve.pipeline.cli", "verify"]
PROSE = ("Here is a solution:", "Sure! This should work.", "Implementation below.", "")


def task_of(problem: dict[str, str]) -> TaskRecord:
    """A ``check``-style code task for a HumanEval problem (canonical solution as reference)."""
    return TaskRecord.model_validate(
        {
            "id": problem["task_id"].replace("/", "_"),
            "family": "code",
            "prompt": problem["prompt"],
            "reference_solution": problem["prompt"] + problem["canonical_solution"],
            "verifier": {
                "family": "code",
                "style": "check",
                "entry_point": problem["entry_point"],
                "test_code": problem["test"],
                "timeout_s": 10,
            },
        }
    )


def batch(n_prompts: int, n_completions: int) -> tuple[list[TaskRecord], list[str], list[bool]]:
    """Tasks, completions and expected pass/fail, grouped by prompt as GRPO groups them."""
    tasks, texts, expect = [], [], []
    for i, p in enumerate(problems()[:n_prompts]):
        task = task_of(p)
        for j in range(n_completions):
            right = j % 2 == 0
            if right:
                code = p["prompt"] + p["canonical_solution"]
            else:
                code = wrong_solution(p, "off_by_one" if (i + j) % 4 == 1 else "wrong_return")
            texts.append(f"{PROSE[j % len(PROSE)]}\n```python\n{code}```\n")
            tasks.append(task)
            expect.append(right)
    return tasks, texts, expect


def via_reward_fn(fn: VerifierReward, tasks: list[TaskRecord], texts: list[str]) -> list[str]:
    """Statuses through the trainer's reward function, called as TRL calls it."""
    fn(
        prompts=[[{"role": "user", "content": t.prompt}] for t in tasks],
        completions=[[{"role": "assistant", "content": c}] for c in texts],
        task=[t.model_dump_json() for t in tasks],
        reference_s=[None] * len(tasks),
    )
    return [s.verdict.status for s in fn.last]


def via_in_process(bv: BatchVerifier, tasks: list[TaskRecord], texts: list[str]) -> list[str]:
    """Statuses from the warm verifier, one completion after another."""
    verifier = bv.verifiers.get("code")
    return [verifier.verify(t, solution_of(t, c)).status for t, c in zip(tasks, texts, strict=True)]


def via_processes(work: Path, tasks: list[TaskRecord], texts: list[str], workers: int) -> list[str]:
    """Statuses from one ``tasksieve verify`` process per completion, ``workers`` at a time."""
    jobs = []
    for i, (t, c) in enumerate(zip(tasks, texts, strict=True)):
        tf, sf = work / f"task{i:03d}.json", work / f"sol{i:03d}.py"
        tf.write_text(t.model_dump_json())
        sf.write_text(solution_of(t, c))
        jobs.append([*CLI, "--task", str(tf), "--solution", str(sf)])

    def one(argv: list[str]) -> str:
        out = subprocess.run(argv, capture_output=True, text=True, env=ENV, cwd=ROOT, check=False)
        try:
            return str(json.loads(out.stdout)["status"])
        except (ValueError, KeyError):
            return f"unreadable (exit {out.returncode}): {out.stderr.strip()[-200:]}"

    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(one, jobs))


def timed(run: Callable[[], list[str]]) -> tuple[float, list[str]]:
    t0 = time.perf_counter()
    statuses = run()
    return time.perf_counter() - t0, statuses


def step_shares(path: Path) -> list[tuple[int, float, float, float]]:
    """(step, step seconds, share in verification, share in generation) per logged step."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        m = json.loads(line)
        if "step_time" in m and "tasksieve/verify_seconds" in m:
            step = float(m["step_time"])
            out.append(
                (
                    int(m["step"]),
                    step,
                    float(m["tasksieve/verify_seconds"]) / step,
                    float(m.get("tasksieve/generate_seconds", 0.0)) / step,
                )
            )
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; 1 if any way gave a verdict other than the constructed one."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--completions", type=int, default=8, help="per prompt (GRPO's G)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--train-metrics", type=Path, help="metrics.jsonl of a tasksieve train run")
    args = ap.parse_args(argv)
    if min(args.prompts, args.completions, args.rounds, args.workers) < 1:
        ap.error("--prompts, --completions, --rounds and --workers must be at least 1")
    print(f"command: {command_line('benchmarks.reward_throughput')}")
    tasks, texts, expect = batch(args.prompts, args.completions)
    want = ["pass" if e else "fail" for e in expect]
    n = len(texts)
    print(f"{n} completions ({args.prompts} prompts x {args.completions}), {args.workers} workers")
    bv = BatchVerifier(SandboxConfig(workers=args.workers), args.workers, RetryPolicy(0, 0.0))
    fn = VerifierReward(bv)
    walls: dict[str, list[float]] = {"reward_fn": [], "in_process": [], "processes": []}
    bad = 0
    try:
        with tempfile.TemporaryDirectory(prefix="reward-bench-") as tmp:
            ways: dict[str, Callable[[], list[str]]] = {
                "reward_fn": lambda: via_reward_fn(fn, tasks, texts),
                "in_process": lambda: via_in_process(bv, tasks, texts),
                "processes": lambda: via_processes(Path(tmp), tasks, texts, args.workers),
            }
            via_reward_fn(fn, tasks, texts)  # warm-up, untimed: verifier workers, caches
            print(f"before: {machine_line()}")
            for r in range(args.rounds):
                for name, run in ways.items():
                    wall, got = timed(run)
                    walls[name].append(wall)
                    wrong = [i for i, (g, w) in enumerate(zip(got, want, strict=True)) if g != w]
                    bad += len(wrong)
                    flag = f"  {len(wrong)} WRONG: {[got[i] for i in wrong[:3]]}" if wrong else ""
                    print(f"round {r + 1}, {name}: {n / wall:.1f} rewards/s{flag}")
            print(f"after: {machine_line()}")
    finally:
        fn.close()
        bv.close()
    base = n / statistics.median(walls["reward_fn"])
    print("\n| way | rewards/s (median) | vs reward_fn |\n|---|---:|---:|")
    for name, w in walls.items():
        rate = n / statistics.median(w)
        print(f"| {name} | {rate:.1f} | {rate / base:.2f}x |")
    if args.train_metrics:
        print("\n| step | step s | in verification | in generation |\n|---:|---:|---:|---:|")
        for step, secs, verify, gen in step_shares(args.train_metrics):
            print(f"| {step} | {secs:.1f} | {100 * verify:.1f}% | {100 * gen:.1f}% |")
    print(
        "verdicts: "
        + ("identical across the three ways and as constructed" if not bad else f"{bad} WRONG")
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(run_reported(main))
