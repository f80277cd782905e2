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

    sudo python -m benchmarks.open_profile --n 50
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
    saved = {n: getattr(pw, n) for n in ("_config", "init_from_info", "_cgroup", "GuestSession")}
    popen = pw.KEEPER.popen

    def seen_popen(argv: list[str], *args: Any, **kwargs: Any) -> Any:
        clock.argv = list(argv)
        return popen(argv, *args, **kwargs)

    pw._config = clock.wrap("config", saved["_config"])
    pw.init_from_info = clock.wrap("info_fd", saved["init_from_info"])
    pw._cgroup = clock.wrap("cgroup", saved["_cgroup"])
    pw.GuestSession = clock.wrap("hello", saved["GuestSession"])  # type: ignore[assignment,misc]
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
    a = ap.parse_args(argv)
    print(command_line("benchmarks.open_profile"))
    sb = ProcessSandbox(warm=False)
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
    guest_import = WSINIT.replace('if __name__ == "__main__":', "if False:")
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
