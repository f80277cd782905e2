"""The ``batch`` setup of ``sandbox_throughput``: the verify stage's own code path.

Each HumanEval problem is one task whose samples are its right and its wrong solution (K=2);
every task goes through ``tasksieve.verifiers.batch.verify_batch`` (what the pipeline's
verify stage runs per task, retries included) on ``get_verifier("code",
make_sandbox("process"))``, the tasks fed from ``workers`` threads. With the fork server this
is one multi-sample entry per task; elsewhere it falls back to one entry per sample.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from benchmarks.humaneval_jobs import Job
from benchmarks.timing import Pass, busy_seconds
from tasksieve.verifiers import get_verifier, make_sandbox
from tasksieve.verifiers.batch import verify_batch
from tasksieve.verifiers.retry import RetryPolicy


def batch_setup(jobs: list[Job]) -> tuple[str, Callable[[int], Pass], str, Callable[[], None]]:
    """(label, timed pass given the worker count, note, stop) for the batch setup."""
    sandbox = make_sandbox("process")
    verifier = get_verifier("code", sandbox)
    groups: dict[str, list[int]] = {}
    for i, j in enumerate(jobs):
        groups.setdefault(j.problem["task_id"], []).append(i)
    order = list(groups.values())
    tasks = [jobs[g[0]].task() for g in order]
    policy = RetryPolicy()

    def one(k: int) -> list[bool]:
        sols = [jobs[i].solution for i in order[k]]
        outs = verify_batch(verifier, tasks[k], sols, policy)
        return [o.verdict.status == "pass" for o in outs]

    def run(workers: int) -> Pass:
        cpu0, t0 = busy_seconds(), time.perf_counter()
        if workers == 1:
            got = [one(k) for k in range(len(order))]
        else:
            with ThreadPoolExecutor(workers) as pool:
                got = list(pool.map(one, range(len(order))))
        wall, cpu = time.perf_counter() - t0, busy_seconds() - cpu0
        verdicts: list[bool] = [False] * len(jobs)
        for idx, vs in zip(order, got, strict=True):
            for i, v in zip(idx, vs, strict=True):
                verdicts[i] = v
        return Pass(len(jobs) / wall, 1000 * cpu / len(jobs), verdicts)

    def stop() -> None:
        verifier.close()
        sandbox.close()

    who = "root" if os.geteuid() == 0 else f"uid {os.geteuid()}"
    label = f"tasksieve process backend ({who}), verify_batch per task (K=2)"
    note = ", ".join(f"{k}={v}" for k, v in dict(getattr(sandbox, "describe", dict)()).items())
    return label, run, note, stop
