"""Where a sandboxed code verification spends its time: the pieces, measured one by one.

Companion to ``sandbox_throughput`` (which measures whole verifications). Prints:

1. fork, run the first HumanEval program, exit and wait, from a bare warm interpreter (the
   fork limit's parent) and from one that also ran our Python harness (as our fork server
   does), with the minor page faults per child (copy-on-write copies and new pages);
2. (root only) ``unshare`` of each namespace our fork server creates per verification, in a
   forked child: wall time per iteration (network namespaces are torn down asynchronously
   by the kernel, so part of their cost is not in it);
3. candidate calls per HumanEval check (each one is a JSON round trip between the tests and
   the candidate process in ours, a plain call in a one-process harness) and the round-trip
   time of a JSON line over a pipe pair between two processes.

It measures pieces in isolation, not their sum; overlaps are not modelled, and on a loaded
machine every figure is inflated by scheduling delay (compare the "none" row).

    python -m benchmarks.sandbox_costs
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import subprocess
import sys
import tempfile
import time

from benchmarks.humaneval_jobs import jobs, problems
from benchmarks.timing import command_line, machine_line, run_reported

FLAGS = {  # from <sched.h>
    "none": 0,
    "mount (CLONE_NEWNS)": 0x00020000,
    "ipc + uts": 0x08000000 | 0x04000000,
    "network (CLONE_NEWNET)": 0x40000000,
    "pid (CLONE_NEWPID, then a fork)": 0x20000000,
    "mount + net + ipc + uts (per verification)": 0x00020000 | 0x40000000 | 0x0C000000,
}

FORK_PROBE = r"""
import os, resource, sys, time
import typing  # what HumanEval/0 imports: preloaded in both parents, as in the fork limit
for src in sys.argv[3:]:
    exec(compile(open(src).read(), "harness.py", "exec"), {"__name__": "__warm__"})
n, job = int(sys.argv[1]), open(sys.argv[2]).read()
r0 = resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt
t0 = time.perf_counter()
for _ in range(n):
    pid = os.fork()
    if pid == 0:
        exec(compile(job, "job.py", "exec"), {"__name__": "__main__"})
        os._exit(0)
    os.waitpid(pid, 0)
dt = time.perf_counter() - t0
r1 = resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt
print(f"{1000 * dt / n:.3f} {(r1 - r0) / n:.0f} {len(sys.modules)}")
"""


def _harness_file() -> str | None:
    """A file holding the Python harness as the sandbox gets it (bundled), or None."""
    try:
        from tasksieve.verifiers.families.python.verifier import HARNESS_SOURCE
    except ImportError:
        return None
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as fh:
        fh.write(HARNESS_SOURCE)
    return fh.name


def fork_costs(n: int, job: str) -> list[tuple[str, float, float, int]]:
    """(label, ms per fork + run ``job`` + exit + wait, minor faults per child, modules)."""
    harness = _harness_file()
    rows = []
    try:
        for label, extra in (
            ("bare interpreter (fork limit's parent)", []),
            ("with our harness and its imports", [harness] if harness else []),
        ):
            out = subprocess.run(
                [sys.executable, "-I", "-S", "-c", FORK_PROBE, str(n), job, *extra],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.split()
            rows.append((label, float(out[0]), float(out[1]), int(out[2])))
    finally:
        if harness:
            os.unlink(harness)
    return rows


def unshare_costs(n: int) -> list[tuple[str, float]]:
    """(namespaces, wall ms per fork + unshare + exit + wait); root only.

    Network namespaces are torn down asynchronously by the kernel, after the child is reaped,
    so part of their cost is not in this wall time (it shows as kernel CPU elsewhere).
    """
    libc = ctypes.CDLL(None, use_errno=True)
    rows = []
    for label, flags in FLAGS.items():
        time.sleep(0.5)  # let the previous batch's asynchronous teardown finish
        t0 = time.perf_counter()
        for _ in range(n):
            pid = os.fork()
            if pid == 0:
                ok = libc.unshare(flags) == 0
                if ok and flags & 0x20000000:
                    inner = os.fork()
                    if inner == 0:
                        os._exit(0)
                    os.waitpid(inner, 0)
                os._exit(0 if ok else 1)
            _, st = os.waitpid(pid, 0)
            if st:
                raise OSError(f"unshare({label}) failed in the child")
        rows.append((label, 1000 * (time.perf_counter() - t0) / n))
    return rows


def calls_per_check() -> tuple[float, int]:
    """Mean and max candidate calls per HumanEval check (counted in this process)."""
    counts = []
    for p in problems():
        env: dict[str, object] = {}
        exec(p["prompt"] + p["canonical_solution"] + "\n" + p["test"], env)
        fn = env[p["entry_point"]]
        calls = [0]

        def counted(*a: object, _fn: object = fn, _n: list[int] = calls, **k: object) -> object:
            _n[0] += 1
            return _fn(*a, **k)  # type: ignore[operator]

        env[p["entry_point"]] = counted
        env["check"](counted)  # type: ignore[operator]
        counts.append(calls[0])
    return sum(counts) / len(counts), max(counts)


PONG = r"""
import sys
for line in sys.stdin:
    sys.stdout.write(line)
    sys.stdout.flush()
"""


def round_trip_us(n: int) -> float:
    """Microseconds per JSON line sent to another process and echoed back over pipes."""
    p = subprocess.Popen(
        [sys.executable, "-I", "-S", "-c", PONG],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert p.stdin and p.stdout
    msg = json.dumps({"fn": "f", "args": [[1, 2, 3], "abc"], "kwargs": {}}) + "\n"
    t0 = time.perf_counter()
    for _ in range(n):
        p.stdin.write(msg)
        p.stdin.flush()
        p.stdout.readline()
    dt = time.perf_counter() - t0
    p.stdin.close()
    p.wait()
    return 1e6 * dt / n


def main(argv: list[str] | None = None) -> int:
    """Print the three measurements."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--n", type=int, default=300, help="iterations per measurement")
    args = ap.parse_args(argv)
    print(f"command: {command_line('benchmarks.sandbox_costs')}")
    print(f"{machine_line()}\n")
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as job:
        job.write(jobs(1)[0].program())
    print("| fork + run HumanEval/0 + exit + wait | ms | minor faults per child | modules |")
    print("|---|---|---|---|")
    for label, ms, faults, mods in fork_costs(args.n, job.name):
        print(f"| {label} | {ms:.2f} | {faults:.0f} | {mods} |")
    if os.geteuid() == 0:
        print("\n| fork + unshare + exit + wait | wall ms |\n|---|---|")
        for label, wall in unshare_costs(args.n):
            print(f"| {label} | {wall:.2f} |")
    else:
        print("\n(unshare costs need root; skipped)")
    mean, most = calls_per_check()
    rtt = round_trip_us(args.n * 10)
    print(f"\ncandidate calls per HumanEval check: mean {mean:.1f}, max {most}")
    print(f"JSON line round trip between two processes over pipes: {rtt:.0f} us")
    print(f"=> about {mean * rtt / 1000:.2f} ms of hand-offs per verification (mean)")
    os.unlink(job.name)
    return 0


if __name__ == "__main__":
    sys.exit(run_reported(main))
