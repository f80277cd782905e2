"""Config verifier throughput on the example references: bounded warm workers vs in-process.

``python -m benchmarks.config_throughput --n 600 --rounds 3`` verifies the reference of every
task in ``examples/tasks/config.jsonl`` round-robin, ``--n`` times per setup per round:

- baseline: ``judge()`` called in this process (the same checks, no time bound, no IPC),
- ours: ``ConfigVerifier.verify`` as the pipeline calls it (warm worker processes, a wall
  clock per verification, JSON over pipes).

Rounds alternate the order of the two setups; every verdict must be ``pass``. Prints rates and
the ratio ours / baseline per round (the cost of the time bound).
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.timing import run_reported
from tasksieve.schemas import ConfigSpec, TaskRecord, Verdict

ROOT = Path(__file__).resolve().parents[1]


def load_tasks() -> list[TaskRecord]:
    lines = (ROOT / "examples" / "tasks" / "config.jsonl").read_text().splitlines()
    return [TaskRecord.model_validate_json(ln) for ln in lines if ln.strip()]


def config_spec(task: TaskRecord) -> ConfigSpec:
    assert isinstance(task.verifier, ConfigSpec), task.id
    return task.verifier


def rate(run: Callable[[TaskRecord, str], Verdict], tasks: list[TaskRecord], n: int) -> float:
    """Verifications per second over ``n`` calls; exits 1 on a verdict that is not pass."""
    t0 = time.perf_counter()
    for i in range(n):
        task = tasks[i % len(tasks)]
        verdict = run(task, task.reference_solution)
        if verdict.status != "pass":
            sys.exit(f"wrong verdict for {task.id}: {verdict.status} {verdict.detail}")
    return n / (time.perf_counter() - t0)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=300, help="verifications per setup per round")
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args(argv)
    print("command: python -m benchmarks.config_throughput " + shlex.join(argv or sys.argv[1:]))
    from tasksieve.verifiers.families.config.judge import judge
    from tasksieve.verifiers.families.config.verifier import ConfigVerifier

    tasks = load_tasks()
    verifier = ConfigVerifier(None)  # type: ignore[arg-type]  # config needs no sandbox
    setups: dict[str, Callable[[TaskRecord, str], Verdict]] = {
        "baseline: in-process judge()": lambda t, s: judge(config_spec(t), s),
        "ours: ConfigVerifier (bounded workers)": verifier.verify,
    }
    for run in setups.values():  # warm up: schemas read, workers started
        rate(run, tasks, len(tasks))
    try:
        for r in range(args.rounds):
            order = list(setups) if r % 2 == 0 else list(reversed(setups))
            rates = {name: rate(setups[name], tasks, args.n) for name in order}
            cells = "  ".join(f"{name}: {v:.1f}/s" for name, v in rates.items())
            base_name, ours_name = setups
            ours, base = rates[ours_name], rates[base_name]
            print(f"round {r + 1}: {cells}  ours/baseline {ours / base:.2f}x")
    finally:
        verifier.close()
    return 0


if __name__ == "__main__":
    sys.exit(run_reported(main))
