"""What a fork of the fork server's warm heap costs, and whether huge pages would lower it.

Builds the heap the process backend's fork server forks from, in an interpreter started as
the server is (``python -I -S``, its preimports and the guest's modules, then ``gc.collect``
and ``gc.freeze``), prints its anonymous mappings, and
times ``--n`` forks of it in two kinds of child, CPU of the parent and of the child and the
child's page faults (``getrusage``):

- **exit**: the child exits at once (copy of the page tables, their teardown);
- **candidate**: the child compiles and calls a HumanEval solution and makes nine JSON round
  trips through a pipe, about what a sample's candidate process does.

Then it asks the kernel to back the heap's anonymous mappings with transparent huge pages
(``MADV_HUGEPAGE`` and ``MADV_COLLAPSE`` on every 2 MB-aligned block they hold), prints how
many blocks there were and how many collapsed, and times the same forks again. A fork copies
one entry per 2 MB huge page instead of 512, so where the heap collapses, the fork and the
exit get cheaper; where it does not, the second timing is the first one's repeat.

    python -m benchmarks.sandbox_heap --n 300
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import os
import resource
import sys

# Standard library only above, and nothing the server lacks (``subprocess`` and ``tempfile``
# would bring ``threading`` and its at-fork hook): the measuring half runs as
# ``python -I -S this-file --worker`` and forks this interpreter.

_MADV_HUGEPAGE, _MADV_COLLAPSE = 14, 25
_HUGE = 2 << 20
# what the server's guest imports besides the preimports (warm runs, the harness's messages)
_GUEST = ("ast", "contextlib", "ctypes", "json", "select", "signal", "socket", "struct", "types")


def anon_mappings() -> list[tuple[int, int]]:
    """(start, end) of this process's private writable anonymous mappings (heap included)."""
    out = []
    with open("/proc/self/maps", encoding="ascii") as fh:
        for line in fh:
            parts = line.split()
            path = parts[5] if len(parts) > 5 else ""
            if parts[1].startswith("rw") and parts[1][3] == "p" and path in ("", "[heap]"):
                start, end = (int(x, 16) for x in parts[0].split("-"))
                out.append((start, end))
    return out


def collapse() -> tuple[int, int]:
    """Ask for huge pages on every 2 MB-aligned block of the anonymous mappings: (blocks, done)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    blocks = done = 0
    for start, end in anon_mappings():
        lo, hi = (start + _HUGE - 1) & ~(_HUGE - 1), end & ~(_HUGE - 1)
        if hi <= lo:
            continue
        n = (hi - lo) // _HUGE
        blocks += n
        libc.madvise(lo, hi - lo, _MADV_HUGEPAGE)
        if libc.madvise(lo, hi - lo, _MADV_COLLAPSE) == 0:
            done += n
    return blocks, done


def _used() -> tuple[float, float, int]:
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime, kids.ru_minflt


def _candidate(source: str, entry: str, args: list[object], out: int) -> None:
    scope: dict[str, object] = {}
    exec(compile(source, "<solution>", "exec"), scope)  # a HumanEval canonical solution
    fn = scope[entry]
    assert callable(fn)
    for _ in range(9):  # the calls of a check, each a JSON message out and back
        msg = json.loads(json.dumps({"args": args}))
        os.write(out, (json.dumps({"ok": repr(fn(*msg["args"]))}) + "\n").encode())


def time_forks(n: int, kind: str, solution: tuple[str, str, list[object]]) -> str:
    """One line: parent and child CPU ms per fork, and the child's page faults."""
    r, w = os.pipe()
    p0, c0, f0 = _used()
    for _ in range(n):
        pid = os.fork()
        if pid == 0:
            if kind == "candidate":
                _candidate(*solution, w)
            os._exit(0)
        os.waitpid(pid, 0)
        if kind == "candidate":
            os.read(r, 1 << 16)
    p1, c1, f1 = _used()
    os.close(r)
    os.close(w)
    return (
        f"{kind:9}: parent {1000 * (p1 - p0) / n:.2f} CPU-ms, child {1000 * (c1 - c0) / n:.2f}"
        f" CPU-ms, {(f1 - f0) / n:.0f} faults per child"
    )


def rss_line() -> str:
    """Resident and anonymous sizes, and how much of it is in huge pages."""
    got = {}
    with open("/proc/self/smaps_rollup", encoding="ascii") as fh:
        for line in fh:
            key, _, rest = line.partition(":")
            if key in ("Rss", "Anonymous", "AnonHugePages"):
                got[key] = int(rest.split()[0]) // 1024
    return ", ".join(f"{k} {v} MB" for k, v in got.items())


def worker(spec_path: str) -> int:
    """The measuring half, in an interpreter started as the fork server is."""
    with open(spec_path, encoding="utf-8") as fh:
        spec = json.load(fh)
    solution = (spec["source"], spec["entry"], spec["args"])
    for name in spec["imports"]:
        __import__(name)
    gc.collect()
    gc.freeze()
    hooks = [m for m in ("threading", "random") if m in sys.modules]
    print(f"modules with an at-fork hook loaded: {hooks or 'none'}")
    maps = anon_mappings()
    sizes = sorted(((e - s) >> 10 for s, e in maps), reverse=True)
    print(f"heap: {rss_line()}; {len(maps)} anonymous mappings, largest KB {sizes[:6]}")
    for kind in ("exit", "candidate"):
        print("4 KB pages " + time_forks(spec["n"], kind, solution), flush=True)
    blocks, done = collapse()
    print(f"huge pages: {blocks} 2 MB-aligned blocks in the mappings, {done} collapsed")
    print(f"heap: {rss_line()}")
    for kind in ("exit", "candidate"):
        print("after ask  " + time_forks(spec["n"], kind, solution), flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Print the heap's mappings and the fork costs before and after asking for huge pages."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--n", type=int, default=300, help="forks per timing")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return worker(args.worker)
    import subprocess
    import tempfile

    from benchmarks.humaneval_jobs import jobs
    from benchmarks.timing import command_line, machine_line
    from tasksieve.verifiers.sandbox.process.forkserver import PREIMPORT

    print(f"command: {command_line('benchmarks.sandbox_heap')}")
    job = next(j for j in jobs(40) if j.problem["entry_point"] == "sort_third")
    spec = {
        "n": args.n,
        "imports": [*PREIMPORT, *_GUEST],
        "source": job.solution,
        "entry": "sort_third",
        "args": [[5, 6, 3, 4, 8, 9, 2]],
    }
    with tempfile.NamedTemporaryFile("w", suffix=".json") as fh:
        json.dump(spec, fh)
        fh.flush()
        print(f"before: {machine_line()}", flush=True)
        cmd = [sys.executable, "-I", "-S", os.path.abspath(__file__), "--worker", fh.name]
        rc = subprocess.run(cmd, check=False).returncode
    print(f"after: {machine_line()}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
