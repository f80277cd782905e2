"""Idle sessions and churn for ``benchmarks.workspaces``: what a session holds, what is left.

``bench_idle`` holds N sessions and counts each one's memory three ways: the proportional set
size (PSS, ``/proc/PID/smaps_rollup``) of its host processes plus what its quota tmpfs holds,
what its memory cgroup is charged, and the drop of the machine's ``MemAvailable`` per session
(everything, kernel memory included, but also whatever else ran meanwhile). ``bench_churn``
opens N at once, uses and closes them, and counts this run's session processes, their pid and
mount namespaces and cgroups, and the host's mount table, before, while open and after.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from tasksieve.verifiers.sandbox.process.sandbox import ProcessSandbox
from tasksieve.verifiers.sandbox.workspace import SessionLimits, Workspace, WorkspaceSpec
from tasksieve.verifiers.sandbox.wsclient import GuestSession


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                ppid = int((p / "stat").read_bytes().rsplit(b")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            kids.setdefault(ppid, []).append(int(p.name))
    return kids


def _pss_kb(pid: int) -> int:
    try:
        for ln in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if ln.startswith("Pss:"):
                return int(ln.split()[1])
    except OSError:
        pass
    return 0


def guest(ws: Workspace) -> GuestSession:
    """The process backend's session behind ``ws`` (its host pid is what is counted)."""
    if not isinstance(ws, GuestSession):
        raise TypeError(f"expected a process-backend session, got {type(ws).__name__}")
    return ws


def session_pss_kb(session: GuestSession, kids: dict[int, list[int]]) -> tuple[int, int]:
    """(PSS in KiB, process count) of a session's host processes (launcher and below; a
    zygote session's agent and below: the zygote is counted apart, ``zygote_pss_kb``)."""
    todo, total, count = [session.host_pid or 0], 0, 0
    while todo:
        pid = todo.pop()
        total, count = total + _pss_kb(pid), count + 1
        todo += kids.get(pid, [])
    return total, count


def _agent_and_kids(session: GuestSession, kids: dict[int, list[int]]) -> list[int]:
    """Where a session's agent may be: its host pid itself (forked by the zygote), else a
    child of its launcher (bubblewrap or unshare)."""
    own = [session.host_pid or 0] if session.describe == "zygote" else []
    return own + kids.get(session.host_pid or 0, [])


def session_layer_kb(session: GuestSession, kids: dict[int, list[int]]) -> int | None:
    """KiB used in the session's quota tmpfs (statfs of its overlay reports the upper layer's
    file system), read through its agent's root; None where it cannot be read."""
    for pid in _agent_and_kids(session, kids):
        try:
            st = os.statvfs(f"/proc/{pid}/root/workspace")
        except OSError:
            continue
        return (st.f_blocks - st.f_bfree) * st.f_frsize // 1024
    return None


def session_cgroup_kb(session: GuestSession, kids: dict[int, list[int]]) -> int | None:
    """KiB charged to the session's memory cgroup (v1 ``memory.usage_in_bytes`` or v2
    ``memory.current``), None where the session has no cgroup of its own."""
    for pid in _agent_and_kids(session, kids):
        try:
            lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
        except OSError:
            continue
        for ln in lines:
            _, ctrl, path = ln.split(":", 2)
            if "memory" in ctrl.split(","):
                f = Path(f"/sys/fs/cgroup/memory{path}/memory.usage_in_bytes")
            elif ctrl == "":
                f = Path(f"/sys/fs/cgroup{path}/memory.current")
            else:
                continue
            if "tasksieve-ws-" in path:
                try:
                    return int(f.read_text()) // 1024
                except (OSError, ValueError):
                    return None
    return None


def zygote_pss_kb(sb: ProcessSandbox) -> int:
    """PSS in KiB of the sandbox's workspace zygote (0 where none runs)."""
    zygote = getattr(sb, "_zygote", None)
    pid = zygote.pid if zygote is not None else None
    return 0 if pid is None else _pss_kb(pid)


def _available_kb() -> int:
    for ln in Path("/proc/meminfo").read_text().splitlines():
        if ln.startswith("MemAvailable:"):
            return int(ln.split()[1])
    return 0


def _p50_mb(kb: list[int]) -> str:
    return f"p50 {statistics.median(kb) / 1024:.2f} MB, max {max(kb) / 1024:.2f} MB"


def bench_idle(sb: ProcessSandbox, repo: Path, n: int) -> None:
    limits = SessionLimits(idle_s=3600, lifetime_s=7200)
    spec = WorkspaceSpec(str(repo), limits=limits)
    avail0 = _available_kb()
    t0 = time.perf_counter()
    with ThreadPoolExecutor(4) as ex:
        sessions = list(ex.map(lambda _: guest(sb.open_workspace(spec)), range(n)))
    opened = time.perf_counter() - t0
    try:
        answering = sum(s.exec("true").exit_code == 0 for s in sessions)
        kids = _children()
        per = [session_pss_kb(s, kids) for s in sessions]
        pss = [p for p, _ in per]
        layer = [session_layer_kb(s, kids) for s in sessions]
        groups = [session_cgroup_kb(s, kids) for s in sessions]
        both = [p + (t or 0) for p, t in zip(pss, layer, strict=True)]
        read = [t for t in layer if t is not None]
        avail1 = _available_kb()
        print(f"  {n} idle sessions opened in {opened:.1f} s, {answering} answering; "
              f"{per[0][1]} host processes each")  # fmt: skip
        print(f"  PSS of a session's processes: {_p50_mb(pss)}, total {sum(pss) / 1024:.0f} MB")
        if read:
            print(f"  its quota tmpfs in use ({len(read)} of {n} read): {_p50_mb(read)}")
        print(f"  PSS + tmpfs per session: {_p50_mb(both)}")
        if zyg := zygote_pss_kb(sb):
            print(f"  the zygote's own PSS (shared by all): {zyg / 1024:.2f} MB, "
                  f"{zyg / n / 1024:.3f} MB per session")  # fmt: skip
        got = [g for g in groups if g is not None]
        if got:
            print(f"  charged to its memory cgroup ({len(got)} of {n}): {_p50_mb(got)}")
        drop = avail0 - avail1
        print(f"  MemAvailable {avail0} kB before, {avail1} kB with them: "
              f"{drop / n / 1024:.2f} MB per session (all memory, other work too)")  # fmt: skip
        if answering != n:
            raise RuntimeError(f"{n - answering} idle sessions did not answer")
    finally:
        with ThreadPoolExecutor(4) as ex:
            list(ex.map(lambda s: s.close(), sessions))


_TICK = os.sysconf("SC_CLK_TCK")
# in the argv of a session's bwrap and agent: the guest's source, or the loader of its code
MARKS = (b"Guest: set up one workspace session", b"c=marshal.loads(os.pread(f,")
# in the argv of the workspace zygote and of the sessions it forked (only those count)
ZYGOTE_MARK = b"Guest: the workspace zygote"


@dataclass(frozen=True)
class Census:
    """This run's sessions as the kernel shows them: processes (a session's bubblewrap and
    agent, which carry one of ``MARKS`` in their argv and descend from this process, and every
    process in an agent's pid namespace), their pid and mount namespaces and memory cgroups,
    the host's mount table, and all processes on the machine (other work included). Counted
    after the sessions closed, a process started since they were counted open is left out of
    the namespaces: the kernel reuses a freed namespace's number (seen: another user's
    container init in namespaces numbered as a closed session's were)."""

    machine: int
    at: float  # seconds since boot when counted (process start times are in the same clock)
    procs: frozenset[int]
    pid_ns: frozenset[str]
    mnt_ns: frozenset[str]
    cgroups: frozenset[str]
    mount_lines: int


def _census(known: Census | None = None) -> Census:
    """Count now; with ``known`` (a census taken while sessions were open) also count what is
    left of the namespaces and cgroups it saw."""
    info: dict[int, tuple[int, bool, str, str]] = {}
    at = time.clock_gettime(time.CLOCK_BOOTTIME)
    newer: set[int] = set()
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                stat = (p / "stat").read_bytes().rsplit(b")", 1)[1].split()
                ppid = int(stat[1])
                if known is not None and int(stat[19]) / _TICK > known.at:
                    # started after the sessions were counted: it cannot be one of theirs,
                    # though the kernel may have given its namespaces their freed numbers
                    newer.add(int(p.name))
                cmdline = (p / "cmdline").read_bytes()
                marked = any(m in cmdline for m in MARKS)
                if ZYGOTE_MARK in cmdline:  # a forked session, not the zygote (host pid ns)
                    marked = os.readlink(p / "ns/pid") != os.readlink("/proc/self/ns/pid")
                info[int(p.name)] = (ppid, marked, os.readlink(p / "ns/pid"),
                                     os.readlink(p / "ns/mnt"))  # fmt: skip
            except (OSError, IndexError, ValueError):
                continue
    me, host = os.getpid(), os.readlink("/proc/self/ns/pid")

    def mine(pid: int) -> bool:
        for _ in range(64):
            if pid == me:
                return True
            if pid not in info:
                return False
            pid = info[pid][0]
        return False

    ours = {pid for pid, (_, marked, _, _) in info.items() if marked and mine(pid)}
    spaces = {info[p][2] for p in ours if info[p][2] != host}
    host_mnt = os.readlink("/proc/self/ns/mnt")
    if known is not None:
        spaces |= known.pid_ns
    old = {pid: v for pid, v in info.items() if pid not in newer}
    procs = ours | {pid for pid, v in old.items() if v[2] in spaces}
    mnts = {info[p][3] for p in procs} - {host_mnt}
    if known is not None:  # any process on the machine still in one of those namespaces
        mnts = {v[3] for v in old.values() if v[3] in known.mnt_ns} | mnts
    groups = set()
    for pid in procs:
        with contextlib.suppress(OSError):
            for ln in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
                if "tasksieve-ws-" in ln:
                    groups.add(ln.split(":", 2)[2])
    if known is not None:
        groups |= {g for g in known.cgroups if any(Path("/sys/fs/cgroup").glob(f"*{g}"))}
    lines = len(Path("/proc/self/mountinfo").read_text().splitlines())
    return Census(len(info), at, frozenset(procs), frozenset(spaces - {host} if known is None
                  else {v[2] for v in old.values() if v[2] in spaces}), frozenset(mnts),
                  frozenset(groups), lines)  # fmt: skip


def bench_churn(sb: ProcessSandbox, repo: Path, n: int) -> None:
    spec = WorkspaceSpec(str(repo))
    before = _census()
    t0 = time.perf_counter()
    with ThreadPoolExecutor(8) as ex:
        sessions = list(ex.map(lambda _: sb.open_workspace(spec), range(n)))
        used = list(ex.map(lambda s: s.exec("echo $RANDOM > f && cat f").exit_code, sessions))
        during = _census()
        list(ex.map(lambda s: s.close(), sessions))
    wall = time.perf_counter() - t0
    time.sleep(1.0)
    after = _census(during)
    print(f"  {n} sessions open at once, {used.count(0)} used fine, all closed in {wall:.1f} s")
    rows = (
        ("session processes", lambda c: len(c.procs)),
        ("session pid namespaces", lambda c: len(c.pid_ns)),
        ("session mount namespaces", lambda c: len(c.mnt_ns)),
        ("session cgroup directories", lambda c: len(c.cgroups)),
        ("host mount table lines", lambda c: c.mount_lines),
        ("processes on the machine", lambda c: c.machine),
    )
    for what, get in rows:
        print(f"  {what:<28} before {get(before)}, while open {get(during)}, after {get(after)}")
    leaked = len(after.procs) + len(after.pid_ns) + len(after.mnt_ns) + len(after.cgroups)
    leaked += max(0, after.mount_lines - before.mount_lines)
    print(f"  leaked: {leaked} (processes, namespaces, cgroups and host mounts of the sessions)")
    if leaked or used.count(0) != n:
        raise RuntimeError(f"churn: {leaked} things leaked, {n - used.count(0)} sessions failed")
