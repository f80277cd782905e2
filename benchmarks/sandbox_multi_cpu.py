"""CPU per sample of the code verifier: one pair run per sample against multi-sample entries.

Counts the CPU time of everything this benchmark starts (this process, the fork server and
every run it forks, reaped or not) from a cgroup-v1 ``cpuacct`` group of its own, so other
work on the machine does not enter the figure the way it enters wall-clock rates. Kernel work
done outside the group (a namespace's deferred teardown) is not counted. Needs root and a
cgroup-v1 ``cpuacct`` hierarchy; says so and exits 2 otherwise.

Each round verifies, for ``--n`` HumanEval problems, the right and the wrong solution: as one
pair run each (``verify``, the path before multi-sample entries), as one ``verify_many`` of
K=2, K=4 (the verify stage's default) and K=8 per task (each solution K/2 times), and as K=4 on
a second fork server whose guest starts a job as it did before it ran where it was forked
(``benchmarks.sandbox_batch.RUN_BEFORE``). Verdicts must match the expected ones; the exit
status is 1 otherwise. Where the cgroup-v1 ``memory`` hierarchy is mounted too, the page
faults of the same processes are counted from a memory group of their own (``total_pgfault``,
its children included: the fork server's own cgroup is one).

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
from benchmarks.sandbox_batch import BEFORE, guest_before
from benchmarks.timing import command_line, machine_line
from tasksieve.verifiers import get_verifier, make_sandbox

CPUACCT = "/sys/fs/cgroup/cpuacct"
MEMORY = "/sys/fs/cgroup/memory"


def main(argv: list[str] | None = None) -> int:
    """Print CPU ms and wall ms per sample for each way; 1 on a wrong verdict."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--n", type=int, default=20, help="problems (each: right and wrong)")
    ap.add_argument("--before", choices=sorted(BEFORE), default="run", help="the K=4 before")
    args = ap.parse_args(argv)
    if os.geteuid() != 0 or not os.path.exists(f"{CPUACCT}/cpuacct.usage"):
        print("needs root and a cgroup-v1 cpuacct hierarchy at " + CPUACCT)
        return 2
    print(f"command: {command_line('benchmarks.sandbox_multi_cpu')}")
    roots = [r for r in (CPUACCT, MEMORY) if r == CPUACCT or os.path.exists(f"{r}/memory.stat")]
    group = f"tasksieve-bench-{os.getpid()}"
    for root in roots:
        os.mkdir(f"{root}/{group}")
        with open(f"{root}/{group}/cgroup.procs", "w") as fh:
            fh.write(str(os.getpid()))

    def leave() -> None:  # back to the parent groups, then remove ours
        for root in roots:
            with open(f"{root}/cgroup.procs", "w") as fh:
                fh.write(str(os.getpid()))
        time.sleep(0.2)
        for root in roots:
            os.rmdir(f"{root}/{group}")

    def used() -> tuple[float, int]:
        with open(f"{CPUACCT}/{group}/cpuacct.usage") as fh:
            cpu = int(fh.read()) / 1e9
        if MEMORY not in roots:
            return cpu, 0
        with open(f"{MEMORY}/{group}/memory.stat") as fh:
            stat = dict(line.split() for line in fh)
        return cpu, int(stat.get("total_pgfault", stat["pgfault"]))

    work = jobs(args.n)
    sandbox = make_sandbox("process")
    verifier = get_verifier("code", sandbox)
    before_box = make_sandbox("process")
    try:
        guest_before(before_box, args.before)
    except RuntimeError as e:
        print(e)
        for box in (sandbox, before_box):
            box.close()
        leave()
        return 2
    before = get_verifier("code", before_box)
    tasks = [(work[i].task(), work[i].solution, work[i + 1].solution) for i in range(0, len(work), 2)]  # fmt: skip  # noqa: E501
    want = ["pass", "fail"]
    ways: dict[str, Callable[[], list[str]]] = {
        "pair run per sample": lambda: [
            verifier.verify(t, s).status for t, a, b in tasks for s in (a, b)
        ],
        "verify_many, K=2": lambda: [
            v.status for t, a, b in tasks for v in verifier.verify_many(t, [a, b])
        ],
        "verify_many, K=4": lambda: [
            v.status for t, a, b in tasks for v in verifier.verify_many(t, [a, b] * 2)
        ],
        f"verify_many, K=4, before {args.before!r}": lambda: [
            v.status for t, a, b in tasks for v in before.verify_many(t, [a, b] * 2)
        ],
        "verify_many, K=8": lambda: [
            v.status for t, a, b in tasks for v in verifier.verify_many(t, [a, b] * 4)
        ],
    }
    got: dict[str, list[tuple[float, float, float]]] = {k: [] for k in ways}
    bad = 0
    try:
        for fn in ways.values():  # warm-up: the server, its imports, reference timings
            fn()
        print(f"before: {machine_line()}")
        for _ in range(args.rounds):
            for name, fn in ways.items():
                (c0, f0), w0 = used(), time.perf_counter()
                statuses = fn()
                w1, (c1, f1) = time.perf_counter(), used()
                n = len(statuses)
                bad += sum(s != want[i % 2] for i, s in enumerate(statuses))
                got[name].append((1000 * (c1 - c0) / n, 1000 * (w1 - w0) / n, (f1 - f0) / n))
        print(f"after: {machine_line()}")
    finally:
        for v, box in ((verifier, sandbox), (before, before_box)):
            v.close()
            box.close()
        leave()
    base = statistics.median(r[0] for r in got["pair run per sample"])
    print("| way | CPU ms per sample | wall ms per sample | page faults per sample | CPU vs pair |")
    print("|---|---|---|---|---|")
    for name, rows in got.items():
        cpu, wall, faults = (statistics.median(r[i] for r in rows) for i in range(3))
        shown = f"{faults:.0f}" if MEMORY in roots else "n/a"
        print(f"| {name} | {cpu:.1f} | {wall:.1f} | {shown} | {cpu / base:.2f}x |")
    print("(medians of the rounds)")
    if bad:
        print(f"FAILED: {bad} wrong verdicts")
        return 1
    print(f"verdicts: all {len(work)} expected verdicts in every way and round")
    return 0


if __name__ == "__main__":
    sys.exit(main())
