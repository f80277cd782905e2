"""CPU per sample of the code verifier: one pair run per sample against multi-sample entries.

Counts the CPU time of everything this benchmark starts (this process, the fork server and
every run it forks, reaped or not) from a cgroup-v1 ``cpuacct`` group of its own, so other
work on the machine does not enter the figure the way it enters wall-clock rates. Kernel work
done outside the group (a namespace's deferred teardown) is not counted. Needs root and a
cgroup-v1 ``cpuacct`` hierarchy; says so and exits 2 otherwise.

Each round verifies, for ``--n`` HumanEval problems, the right and the wrong solution: as one
pair run each (``verify``, the path before multi-sample entries), as one ``verify_many`` of
K=2 per task, and as one ``verify_many`` of K=8 (each solution four times). Verdicts must
match the expected ones; the exit status is 1 otherwise.

    python -m benchmarks.sandbox_multi_cpu --rounds 3 --n 20
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable

from benchmarks.humaneval_jobs import jobs
from benchmarks.timing import command_line, machine_line
from tasksieve.verifiers import get_verifier, make_sandbox

CPUACCT = "/sys/fs/cgroup/cpuacct"


def main(argv: list[str] | None = None) -> int:
    """Print CPU ms and wall ms per sample for each way; 1 on a wrong verdict."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--n", type=int, default=20, help="problems (each: right and wrong)")
    args = ap.parse_args(argv)
    if os.geteuid() != 0 or not os.path.exists(f"{CPUACCT}/cpuacct.usage"):
        print("needs root and a cgroup-v1 cpuacct hierarchy at " + CPUACCT)
        return 2
    print(f"command: {command_line('benchmarks.sandbox_multi_cpu')}")
    group = f"{CPUACCT}/tasksieve-bench-{os.getpid()}"
    os.mkdir(group)
    with open(f"{group}/cgroup.procs", "w") as fh:
        fh.write(str(os.getpid()))

    def used() -> float:
        with open(f"{group}/cpuacct.usage") as fh:
            return int(fh.read()) / 1e9

    work = jobs(args.n)
    sandbox = make_sandbox("process")
    verifier = get_verifier("code", sandbox)
    tasks = [(work[i].task(), work[i].solution, work[i + 1].solution) for i in range(0, len(work), 2)]  # fmt: skip  # noqa: E501
    want = ["pass", "fail"]
    ways: dict[str, Callable[[], list[str]]] = {
        "pair run per sample": lambda: [
            verifier.verify(t, s).status for t, a, b in tasks for s in (a, b)
        ],
        "verify_many, K=2": lambda: [
            v.status for t, a, b in tasks for v in verifier.verify_many(t, [a, b])
        ],
        "verify_many, K=8": lambda: [
            v.status for t, a, b in tasks for v in verifier.verify_many(t, [a, b] * 4)
        ],
    }
    got: dict[str, list[tuple[float, float]]] = {k: [] for k in ways}
    bad = 0
    try:
        for fn in ways.values():  # warm-up: the server, its imports, reference timings
            fn()
        print(f"before: {machine_line()}")
        for _ in range(args.rounds):
            for name, fn in ways.items():
                c0, w0 = used(), time.perf_counter()
                statuses = fn()
                w1, c1 = time.perf_counter(), used()
                n = len(statuses)
                bad += sum(s != want[i % 2] for i, s in enumerate(statuses))
                got[name].append((1000 * (c1 - c0) / n, 1000 * (w1 - w0) / n))
        print(f"after: {machine_line()}")
    finally:
        verifier.close()
        sandbox.close()
        with open(f"{CPUACCT}/cgroup.procs", "w") as fh:
            fh.write(str(os.getpid()))
        time.sleep(0.2)
        os.rmdir(group)
    base = statistics.median(c for c, _ in got["pair run per sample"])
    print("| way | CPU ms per sample (median) | wall ms per sample (median) | CPU vs pair |")
    print("|---|---|---|---|")
    for name, rows in got.items():
        cpu = statistics.median(c for c, _ in rows)
        wall = statistics.median(w for _, w in rows)
        print(f"| {name} | {cpu:.1f} | {wall:.1f} | {cpu / base:.2f}x |")
    if bad:
        print(f"FAILED: {bad} wrong verdicts")
        return 1
    print(f"verdicts: all {len(work)} expected verdicts in every way and round")
    return 0


if __name__ == "__main__":
    sys.exit(main())
