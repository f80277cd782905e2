"""CPU that other processes used while a benchmark ran: what a load average cannot tell.

A benchmark that runs 64 sandbox sessions at once raises the 1-minute load average to about
40 on its own, so the load rule of ``timing.MachineReport`` ("no goal judged above the core
count") could never judge it, busy machine or quiet. ``OthersCpu`` measures what the rule is
for, other work, directly: a thread scans ``/proc`` every ``interval`` seconds and adds up the
CPU time (own plus reaped children, clock ticks) of every process that is not the run's own;
for pid 1 its own time only, since init reaps every orphan (a container's shim when the
container goes, the run's own work).

The run's own processes are the descendants of this process and of the container engine's
daemons and shims (``dockerd``, ``containerd``, ``containerd-shim``: a ``docker exec``
baseline runs there), and, where a caller names cgroups (``own_cgroups``: path prefixes such as
``/demo-costs-``), every process in one of them and its descendants. A process found to be
the run's own stays so while it lives: a sandbox process whose parent exited is reparented to
init and is no descendant any more, and one that exited waits there to be reaped, holding what
its children used. A process that is reparented before a scan first sees it is found only
through its cgroup, so name the run's cgroups where it has them. Kernel threads serve everyone
and are left out. A process seen in two scans counts its growth between them, one first seen
counts all it has used (it started during the run), so a short-lived process of another user
that starts and ends between two scans is seen only through its parent's reaped time. One
scan of about 500 processes costs a few milliseconds: well under 1% of a core at the default
interval.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable

ENGINES = ("dockerd", "containerd")  # comm prefixes: containerd-shim* too
TICK = os.sysconf("SC_CLK_TCK")


def process_table() -> dict[int, tuple[int, str, int]]:
    """pid -> (parent pid, command name, CPU ticks used and reaped)."""
    rows: dict[int, tuple[int, str, int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                raw = fh.read()
        except OSError:
            continue
        head, _, tail = raw.rpartition(b")")
        fields = tail.split()
        try:  # init reaps every orphan, the run's own (a container's shim) included
            ticks = sum(int(f) for f in fields[11 : 13 if name == "1" else 15])
            rows[int(name)] = (
                int(fields[1]),
                head.split(b"(", 1)[1].decode(errors="replace"),
                ticks,
            )
        except (ValueError, IndexError):
            continue
    return rows


def descendants(table: dict[int, tuple[int, str, int]], roots: Iterable[int]) -> set[int]:
    """``roots`` and every descendant of any of them in ``table``."""
    kids: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in table.items():
        kids.setdefault(ppid, []).append(pid)
    todo = list(roots)
    seen: set[int] = set()
    while todo:
        pid = todo.pop()
        if pid not in seen:
            seen.add(pid)
            todo += kids.get(pid, [])
    return seen


def own_pids(table: dict[int, tuple[int, str, int]], roots: Iterable[int]) -> set[int]:
    """``roots``, the engines' daemons and shims, and every descendant of any of them."""
    engines = (p for p, (_, comm, _) in table.items() if comm.startswith(ENGINES))
    return descendants(table, [*roots, *engines])


def in_cgroups(pid: int, prefixes: tuple[str, ...]) -> bool:
    """The process is in a cgroup whose path starts with one of ``prefixes`` (any hierarchy)."""
    try:
        with open(f"/proc/{pid}/cgroup", encoding="utf-8", errors="replace") as fh:
            paths = [line.rstrip("\n").split(":", 2)[-1] for line in fh]
    except OSError:
        return False
    return any(path.startswith(prefixes) for path in paths)


def kernel_thread(pid: int, ppid: int) -> bool:
    return pid == 2 or ppid == 2


class OthersCpu:
    """Use as ``with OthersCpu() as others: ...``; then ``others.cores`` is the average number
    of cores that other processes kept busy (CPU seconds over wall seconds)."""

    def __init__(
        self, interval: float = 2.0, root: int | None = None, own_cgroups: tuple[str, ...] = ()
    ) -> None:
        self.interval = interval
        self.root = os.getpid() if root is None else root
        self.own_cgroups = own_cgroups
        self._own: set[int] = set()  # the run's own pids at the last scan
        self.seconds = 0.0  # other processes' CPU seconds so far
        self.wall = 0.0
        self.scans = 0
        self.by_name: dict[str, float] = {}  # other processes' CPU seconds by command name
        self._last: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="others-cpu", daemon=True)
        self._t0 = 0.0

    def scan(self) -> None:
        """Add what other processes used since the last scan (the first scan only records)."""
        table = process_table()
        # once the run's own, a process stays so while it lives: one whose parent exited is
        # reparented to init, and one that exited waits there to be reaped (out of its
        # cgroups by then) with everything its children used
        ours = own_pids(table, [self.root, *(self._own & table.keys())])
        if self.own_cgroups:
            grouped = [p for p in table if p not in ours and in_cgroups(p, self.own_cgroups)]
            ours |= descendants(table, grouped)
        self._own = ours
        now: dict[int, int] = {}
        grown = 0
        for pid, (ppid, comm, ticks) in table.items():
            if pid in ours or kernel_thread(pid, ppid):
                continue
            now[pid] = ticks
            used = max(0, ticks - self._last.get(pid, 0)) if self.scans else 0
            if used:
                grown += used
                self.by_name[comm] = self.by_name.get(comm, 0.0) + used / TICK
        self.seconds += grown / TICK
        self._last = now
        self.scans += 1

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.scan()

    def __enter__(self) -> OthersCpu:
        self._t0 = time.monotonic()
        self.scan()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.scan()
        self.wall = time.monotonic() - self._t0

    def top(self, n: int = 3) -> str:
        """The ``n`` busiest other command names, ``name 1.2 s, ...`` ("none" when idle)."""
        ranked = sorted(self.by_name.items(), key=lambda kv: -kv[1])[:n]
        busiest = [f"{name} {sec:.1f} s" for name, sec in ranked if sec > 0]
        return ", ".join(busiest) or "none"

    @property
    def cores(self) -> float:
        """Other processes' average cores busy over the run (0 before it ended)."""
        return self.seconds / self.wall if self.wall > 0 else 0.0
