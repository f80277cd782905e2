"""Where a cold ``open_workspace`` of the process backend spends its time.

Host phases are timed by wrapping the names ``verifiers.sandbox.process.workspace`` calls
(the module itself is unchanged): building the guest's config, starting bubblewrap (the fork and
exec from the keeper thread), waiting for bubblewrap to report the namespace's init pid
(``--info-fd``: namespaces and the read-only root built), creating the session's cgroup and
moving the init into it, and waiting for the guest agent's hello (the guest interpreter
starting, the guest code compiled and imported, the layer mounted, the agent set up). The hello
wait is then split with the same bubblewrap command line running, in place of the guest:
``/bin/true`` (bubblewrap alone), ``python -I -S -c pass`` (plus the interpreter), and the guest
source with its ``main()`` disabled (plus compiling and importing the 38 KB guest program),
and the guest's standard-library imports alone (to split importing from compiling).

``--zygote`` profiles an open forked by the workspace zygote instead: the host's phases
(config, cgroup created, the zygote's fork and answer, the hello), and from the kernel's
``/proc/PID/schedstat`` the session agent's time on the CPU up to its hello against its time
waiting for one (the load's share).

    sudo python -m benchmarks.open_profile --n 50
    sudo python -m benchmarks.open_profile --n 50 --zygote
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.timing import command_line, machine_line, run_reported
from benchmarks.ws_sessions import guest
from tasksieve.verifiers.sandbox.process import workspace as pw
from tasksieve.verifiers.sandbox.process.launchers import WSINIT
from tasksieve.verifiers.sandbox.process.sandbox import ProcessSandbox
from tasksieve.verifiers.sandbox.workspace import WorkspaceSpec

PHASES = ("config", "popen", "info_fd", "cgroup", "hello")


class Clock:
    """Milliseconds per phase of the current open, kept per open."""

    def __init__(self) -> None:
        self.now: dict[str, float] = {}
        self.rows: list[dict[str, float]] = []
        self.argv: list[str] = []

    def wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.now[name] = self.now.get(name, 0.0) + 1000 * (time.perf_counter() - t0)

        return timed


def instrument(clock: Clock) -> Callable[[], None]:
    """Wrap the workspace module's steps; returns the undo."""
    saved = {n: getattr(pw, n) for n in ("_config", "init_from_info", "_cgroup", "SnapshotSession")}
    popen = pw.KEEPER.popen

    def seen_popen(argv: list[str], *args: Any, **kwargs: Any) -> Any:
        clock.argv = list(argv)
        return popen(argv, *args, **kwargs)

    pw._config = clock.wrap("config", saved["_config"])
    pw.init_from_info = clock.wrap("info_fd", saved["init_from_info"])
    pw._cgroup = clock.wrap("cgroup", saved["_cgroup"])
    pw.SnapshotSession = clock.wrap("hello", saved["SnapshotSession"])  # type: ignore[assignment,misc]
    pw.KEEPER.popen = clock.wrap("popen", seen_popen)  # type: ignore[method-assign]

    def undo() -> None:
        for n, v in saved.items():
            setattr(pw, n, v)
        pw.KEEPER.popen = popen  # type: ignore[method-assign]

    return undo


def variant(argv: list[str], tail: list[str]) -> list[str]:
    """The session's bubblewrap command line with ``tail`` as its program, no info fd."""
    cut = argv.index("--")
    head = argv[:cut]
    if "--info-fd" in head:
        i = head.index("--info-fd")
        head = head[:i] + head[i + 2 :]
    return [*head, "--", *tail]


def timed_runs(argv: list[str], n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        subprocess.run(argv, check=True, stdin=subprocess.DEVNULL, capture_output=True)
        out.append(1000 * (time.perf_counter() - t0))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--n", type=int, default=50, help="cold opens (and runs of each variant)")
    ap.add_argument("--zygote", action="store_true", help="profile opens forked by the zygote")
    a = ap.parse_args(argv)
    print(command_line("benchmarks.open_profile"))
    if a.zygote:
        return zygote_profile(a.n)
    sb = ProcessSandbox(warm=False, workspace_open="cold")
    if sb.method != "bwrap":
        print(f"needs bubblewrap (this sandbox uses {sb.method})")
        return 2
    clock = Clock()
    undo = instrument(clock)
    totals: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        repo.mkdir()
        (repo / "a.py").write_text("x = 1\n")
        spec = WorkspaceSpec(str(repo))
        try:
            sb.open_workspace(spec).close()  # warm-up
            for _ in range(a.n):
                clock.now = {}
                t0 = time.perf_counter()
                ws = sb.open_workspace(spec)
                totals.append(1000 * (time.perf_counter() - t0))
                clock.rows.append(clock.now)
                ws.close()
        finally:
            undo()
            sb.close()
        report(clock, totals)
        split_hello(clock.argv, a.n)
    return 0


def zygote_profile(n: int) -> int:
    """``n`` opens forked by the zygote: host phases, the agent's CPU and runqueue time."""
    sb = ProcessSandbox(warm=False, workspace_open="zygote")
    zygote = sb._zygote
    if zygote is None:
        print(f"no workspace zygote here: {sb.describe()['workspace_open']}")
        sb.close()
        return 2
    clock = Clock()
    saved = (pw._config, pw.SessionCgroup.create, zygote.fork_session, pw.SnapshotSession)
    pw._config = clock.wrap("config", saved[0])
    pw.SessionCgroup.create = clock.wrap("cgroup", saved[1])  # type: ignore[method-assign]
    zygote.fork_session = clock.wrap("fork", saved[2])  # type: ignore[method-assign]
    pw.SnapshotSession = clock.wrap("hello", saved[3])  # type: ignore[assignment,misc]
    totals: list[float] = []
    agent: list[tuple[float, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "a.py").write_text("x = 1\n")
        spec = WorkspaceSpec(tmp)
        try:
            sb.open_workspace(spec).close()  # starts the zygote
            for _ in range(n):
                clock.now = {}
                t0 = time.perf_counter()
                ws = sb.open_workspace(spec)
                totals.append(1000 * (time.perf_counter() - t0))
                clock.rows.append(clock.now)
                run, wait = Path(f"/proc/{guest(ws).host_pid}/schedstat").read_text().split()[:2]
                agent.append((int(run) / 1e6, int(wait) / 1e6))
                ws.close()
        finally:
            pw._config, pw.SessionCgroup.create = saved[0], saved[1]  # type: ignore[method-assign]
            pw.SnapshotSession = saved[3]  # type: ignore[misc]
            sb.close()
    total = statistics.fmean(totals)
    print(f"{n} zygote opens (p50 {statistics.median(totals):.2f} ms); {machine_line()}")
    print("| phase | mean ms | share of the mean open |")
    print("|---|---|---|")
    names = {
        "config": "guest config (paths, limits, seccomp as hex)",
        "cgroup": "session cgroup created (the session moves itself in)",
        "fork": "zygote: request sent, session forked, pidfd back",
        "hello": "session: namespaces, root, layer, agent; hello read",
    }
    for p, label in names.items():
        m = statistics.fmean(r.get(p, 0.0) for r in clock.rows)
        print(f"| {label} | {m:.2f} | {100 * m / total:.0f}% |")
    print(f"| whole zygote open | {total:.2f} | 100% |")
    run_ms = statistics.median(r for r, _ in agent)
    wait_ms = statistics.median(w for _, w in agent)
    print(f"session agent up to its hello (p50): {run_ms:.2f} ms on the CPU, "
          f"{wait_ms:.2f} ms waiting for one (load)")  # fmt: skip
    return 0


def report(clock: Clock, totals: list[float]) -> None:
    """The host phases: means (they add up to the mean open), the p50 open beside them."""
    med = {p: statistics.fmean(r.get(p, 0.0) for r in clock.rows) for p in PHASES}
    total = statistics.fmean(totals)
    print(f"{len(totals)} cold opens (p50 {statistics.median(totals):.2f} ms); {machine_line()}")
    print("| phase | mean ms | share of the mean open |")
    print("|---|---|---|")
    names = {
        "config": "guest config (paths, limits, seccomp as hex)",
        "popen": "start bubblewrap (fork and exec from the keeper thread)",
        "info_fd": "bubblewrap: namespaces, read-only root, init pid reported",
        "cgroup": "session cgroup created, init moved in",
        "hello": "guest: interpreter, guest code, layer mounts, agent; hello read",
    }
    for p in PHASES:
        print(f"| {names[p]} | {med[p]:.2f} | {100 * med[p] / total:.0f}% |")
    rest = total - sum(med.values())
    print(
        f"| the rest (uid, memfd, pipes, session object) | {rest:.2f} | {100 * rest / total:.0f}% |"
    )
    print(f"| whole cold open | {total:.2f} | 100% |")


def split_hello(argv: list[str], n: int) -> None:
    """The session's bubblewrap command line with lighter programs in place of the guest."""
    py = argv[argv.index("--") + 1]
    guest_import = WSINIT.replace('if __name__ == "__main__" and', "if False and")
    found = re.finditer(r"^(?:import ([\w.]+)|from ([\w.]+) import)", WSINIT, re.M)
    stdlib = sorted({m.group(1) or m.group(2) for m in found} - {"__future__"})
    stdlib = [m for m in stdlib if not m.startswith("tasksieve")]
    variants = {
        "bubblewrap running /bin/true": ["/bin/true"],
        "bubblewrap running python -I -S -c pass": [py, "-I", "-S", "-c", "pass"],
        f"... python importing the guest's {len(stdlib)} stdlib modules only": [
            py,
            "-I",
            "-S",
            "-c",
            "import " + ", ".join(stdlib),
        ],
        "bubblewrap running the guest code, main() disabled": [py, "-I", "-S", "-c", guest_import],
    }
    print("| same bubblewrap command line, whole run | p50 ms |")
    print("|---|---|")
    for label, tail in variants.items():
        runs = timed_runs(variant(argv, tail), n)
        print(f"| {label} | {statistics.median(runs):.2f} |")


if __name__ == "__main__":
    sys.exit(run_reported(lambda: main()))
