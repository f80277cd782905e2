"""Workspaces: copy-on-write creation, commands in a live session, idle sessions, churn.

Sub-measures (any subset; all by default), each printing the load before and after:

- ``--create``: a generated repository of ``--files`` files; p50/p99 of (a) the
  copy-on-write layer alone (a quota tmpfs plus an overlay mounted in a private mount
  namespace), (b) ``open_workspace`` in each mode of ``--modes`` (cold, or forked by the
  workspace zygote: namespaces, root, layer, guest agent ready), (c) ``open_workspace``
  from a pre-started pool (``prewarm_workspaces``), against
  (d) ``cp -a`` of the tree and (e) ``docker run -d`` of a container whose image holds it.
- ``--open``: cold ``open_workspace`` (bubblewrap and a fresh interpreter) against one forked
  by the workspace zygote, side by side in one run: the samples alternate between the two
  sandboxes, so load that comes and goes hits both alike; p50/p99 of each and their ratio.
- ``--exec``: ``true`` in a live session's shell vs ``docker exec`` into a warm container.
- ``--idle N``: N idle sessions held at once; each one's memory as PSS of its host processes
  plus its quota tmpfs, as its memory cgroup's charge, and as the machine's ``MemAvailable``
  drop per session (``benchmarks.ws_sessions``).
- ``--churn N``: N sessions open at once (opened from 8 threads), each used, all closed; this
  run's session processes, their pid and mount namespaces and cgroups, and the host's mount
  table, before, while open and after; anything left makes the run fail.
- ``--quick``: every measure, small (a smoke run).

``--idle`` and ``--churn`` run once per open mode of ``--modes`` (``cold,zygote`` by default);
``--exec`` uses the first; ``--create`` times the open of each.

    sudo python -m benchmarks.workspaces --open --n 200 --idle 1000 --churn 200
"""

from __future__ import annotations

import argparse
import contextlib
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.timing import command_line, machine_line, run_reported
from benchmarks.ws_sessions import bench_churn, bench_idle, guest
from tasksieve.verifiers.sandbox.process.sandbox import ProcessSandbox
from tasksieve.verifiers.sandbox.workspace import WorkspaceSpec

IMAGE = "tasksieve-sandbox:latest"
LAYER_SCRIPT = r"""
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
def mount(src, dst, fs, data):
    if libc.mount(src.encode(), dst.encode(), fs.encode(), 0, data.encode()) != 0:
        raise OSError(ctypes.get_errno(), "mount " + dst)
lower, base, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
libc.mount(b"none", b"/", None, 0x4000 | (1 << 18), None)
for i in range(n):
    t = time.perf_counter()
    ws = f"{base}/ws{i}"
    os.mkdir(ws)
    mount("layer", ws, "tmpfs", "size=64m")
    os.mkdir(ws + "/u"); os.mkdir(ws + "/w")
    mount("overlay", ws, "overlay", f"lowerdir={lower},upperdir={ws}/u,workdir={ws}/w")
    print((time.perf_counter() - t) * 1000, flush=True)
"""


def pct(xs: list[float], q: float) -> float:
    """The ``q`` quantile of ``xs`` (nearest rank)."""
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def line(name: str, ms: list[float]) -> str:
    return f"  {name:<34} p50 {statistics.median(ms):9.2f} ms   p99 {pct(ms, 0.99):9.2f} ms"


def make_repo(root: Path, files: int) -> None:
    """``files`` small Python files in nested packages under ``root``."""
    for i in range(files):
        d = root / f"pkg{i % 20}" / f"sub{i % 7}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"mod{i}.py").write_text(f"def f{i}(x):\n    return x + {i}\n" * 20)


def timed(fn: Callable[[], object], n: int) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1000)
    return out


def docker_ok() -> bool:
    try:
        r = subprocess.run(["docker", "image", "inspect", IMAGE], capture_output=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0


def docker_image_with(repo: Path) -> str:
    tag = "tasksieve-bench-repo:latest"
    (repo.parent / "Dockerfile").write_text(f"FROM {IMAGE}\nCOPY repo /snapshot\n")
    subprocess.run(["docker", "build", "-q", "-t", tag, str(repo.parent)], check=True,
                   capture_output=True, timeout=600)  # fmt: skip
    return tag


def bench_create(sbs: dict[str, ProcessSandbox], repo: Path, n: int) -> None:
    spec = WorkspaceSpec(str(repo))
    scratch = Path(tempfile.mkdtemp(prefix="ws-bench-"))
    try:
        out = subprocess.run(
            ["unshare", "--mount", "python3", "-I", "-S", "-c", LAYER_SCRIPT, str(repo),
             str(scratch), str(n)], capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        layer = [float(x) for x in out.split()]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(line("copy-on-write layer (mounts only)", layer))
    opens: dict[str, list[float]] = {}
    for mode, box in sbs.items():
        opens[mode] = []
        for _ in range(n):
            t = time.perf_counter()
            ws = box.open_workspace(spec)
            opens[mode].append((time.perf_counter() - t) * 1000)
            ws.close()
        print(line(f"open_workspace, {box.describe()['workspace_open']}", opens[mode]))
    sb = next(iter(sbs.values()))
    pool = sb.prewarm_workspaces(spec, size=4)
    warm = []
    for _ in range(n):
        pool.wait_ready(60)
        t = time.perf_counter()
        ws = sb.open_workspace(spec)
        warm.append((time.perf_counter() - t) * 1000)
        ws.close()
    pool.close()
    print(line("open_workspace, pre-started pool", warm))
    dest = Path(tempfile.mkdtemp(prefix="ws-bench-cp-", dir=repo.parent))
    cps = []
    for i in range(min(n, 30)):  # deleting copies is slow where the disk discards blocks
        t = time.perf_counter()
        subprocess.run(["cp", "-a", str(repo), str(dest / str(i))], check=True)
        cps.append((time.perf_counter() - t) * 1000)
    shutil.rmtree(dest, ignore_errors=True)
    print(line(f"cp -a of the tree ({len(cps)} copies)", cps))
    cp50 = statistics.median(cps)
    per_mode = "; ".join(f"/ {m} open p50 = {cp50 / statistics.median(x):.1f}x"
                         for m, x in opens.items())  # fmt: skip
    print(f"  cp -a p50 / layer p50 = {cp50 / statistics.median(layer):.0f}x; {per_mode}; "
          f"/ pooled open p50 = {cp50 / statistics.median(warm):.0f}x")  # fmt: skip
    if not docker_ok():
        print("  docker run: skipped (no engine or no sandbox image)")
        return
    tag = docker_image_with(repo)
    runs = []
    for _ in range(min(n, 20)):
        t = time.perf_counter()
        cid = subprocess.run(["docker", "run", "-d", "--network", "none", tag, "sleep", "60"],
                             capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
        runs.append((time.perf_counter() - t) * 1000)
        subprocess.run(["docker", "rm", "-f", cid], capture_output=True)
    print(line(f"docker run -d ({len(runs)} runs)", runs))


def _oncpu_ms(pids: list[int]) -> float:
    """On-CPU time of ``pids`` so far (``/proc/PID/schedstat``, nanoseconds), in ms."""
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError, ValueError):
            total += int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])
    return total / 1e6


def _tree(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        with contextlib.suppress(OSError):
            todo += [int(k) for k in Path(f"/proc/{p}/task/{p}/children").read_text().split()]
    return out


def bench_open(sbs: dict[str, ProcessSandbox], repo: Path, n: int) -> None:
    """``n`` opens (and closes) per sandbox, alternating between them; p50/p99 each.

    Beside the wall time, the CPU time an open costs, which load does not stretch: the
    calling thread's, the zygote's during the open, and the session's own processes' up to
    the agent's hello (its launcher and agent; a forked session's agent)."""
    spec = WorkspaceSpec(str(repo))
    for sb in sbs.values():  # a first open each: the zygote starts, caches warm up
        sb.open_workspace(spec).close()
    ms: dict[str, list[float]] = {mode: [] for mode in sbs}
    cpu: dict[str, list[float]] = {mode: [] for mode in sbs}
    for _ in range(n):
        for mode, sb in sbs.items():
            zpid = sb._zygote.pid if sb._zygote is not None else None
            z0 = _oncpu_ms([zpid]) if zpid else 0.0
            c0, t = time.thread_time(), time.perf_counter()
            ws = guest(sb.open_workspace(spec))
            ms[mode].append((time.perf_counter() - t) * 1000)
            host = (time.thread_time() - c0) * 1000
            z1 = _oncpu_ms([zpid]) if zpid else 0.0
            cpu[mode].append(host + z1 - z0 + _oncpu_ms(_tree(ws.host_pid or 0)))
            ws.close()
    for mode, sb in sbs.items():
        print(line(f"open_workspace, {mode} ({sb.describe()['workspace_open']})", ms[mode]))
        print(line(f"  CPU time of one {mode} open", cpu[mode]))
    if len(ms) == 2:
        (a, xa), (b, xb) = sorted(ms.items())  # cold first: the ratio is cold over zygote
        print(f"  wall p50 {a} / {b} = {statistics.median(xa) / statistics.median(xb):.2f}x, "
              f"p99 {pct(xa, 0.99) / pct(xb, 0.99):.2f}x; CPU p50 "
              f"{statistics.median(cpu[a]) / statistics.median(cpu[b]):.2f}x")  # fmt: skip


def bench_exec(sb: ProcessSandbox, repo: Path, n: int) -> None:
    ws = sb.open_workspace(WorkspaceSpec(str(repo)))
    try:
        ws.exec("true")
        live = timed(lambda: ws.exec("true"), n)
    finally:
        ws.close()
    print(line("exec 'true' in a live session", live))
    if not docker_ok():
        print("  docker exec: skipped (no engine or no sandbox image)")
        return
    cid = subprocess.run(["docker", "run", "-d", "--network", "none", IMAGE, "sleep", "300"],
                         capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    try:
        de = timed(lambda: subprocess.run(["docker", "exec", cid, "true"], check=True), min(n, 50))
    finally:
        subprocess.run(["docker", "rm", "-f", cid], capture_output=True)
    print(line("docker exec 'true', warm container", de))
    print(f"  docker exec p50 / live exec p50 = "
          f"{statistics.median(de) / statistics.median(live):.0f}x")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--create", action="store_true")
    ap.add_argument("--open", action="store_true", help="cold vs zygote opens, side by side")
    ap.add_argument("--exec", action="store_true")
    ap.add_argument("--idle", type=int, default=0, metavar="N")
    ap.add_argument("--churn", type=int, default=0, metavar="N")
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--n", type=int, default=100, help="samples per timing")
    ap.add_argument("--isolation", default="bwrap", choices=["bwrap", "unshare"])
    ap.add_argument("--modes", default="cold,zygote", help="open modes, comma-separated")
    ap.add_argument("--quick", action="store_true", help="every measure, small: a smoke run")
    a = ap.parse_args(argv)
    if a.quick:
        a.create, a.open, a.exec, a.idle, a.churn, a.files, a.n = True, True, True, 4, 8, 200, 5
    if not (a.create or a.open or a.exec or a.idle or a.churn):
        a.create, a.open, a.exec, a.idle, a.churn = True, True, True, 300, 200
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    modes = [m for m in a.modes.split(",") if m]
    sbs = {m: ProcessSandbox(isolation=a.isolation, warm=False, workspace_open=m) for m in modes}
    base = Path(tempfile.mkdtemp(prefix="ws-bench-repo-"))
    repo = base / "repo"
    make_repo(repo, a.files)
    print(command_line("benchmarks.workspaces"))
    print(f"workspaces ({a.isolation}), repository of {a.files} files; {machine_line()}")
    for m, box in sbs.items():
        print(f"  mode {m}: {box.describe()['workspace_open']}")
    try:
        if a.open:
            print(f"bench_open: {machine_line()}")
            bench_open(sbs, repo, a.n)
            print(f"  after: {machine_line()}")
        if a.create:
            print(f"bench_create: {machine_line()}")
            bench_create(sbs, repo, a.n)
            print(f"  after: {machine_line()}")
        for flag, fn, arg, each in (
            (a.exec, bench_exec, a.n * 5, False),
            (a.idle, bench_idle, a.idle, True),
            (a.churn, bench_churn, a.churn, True),
        ):
            for m in modes if (flag and each) else modes[:1] if flag else []:
                print(f"{fn.__name__} ({m}): {machine_line()}")
                fn(sbs[m], repo, arg)
                print(f"  after: {machine_line()}")
    finally:
        for box in sbs.values():
            box.close()
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(run_reported(lambda: main()))
