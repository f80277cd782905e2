"""Per-session cgroups for workspaces of the ``process`` sandbox, where the host allows them.

RLIMITs bound each process; a cgroup bounds a session's processes together. ``probe``
finds what this process may use: cgroup v2 (a ``cgroup2`` mount whose cgroup of ours
delegates ``memory`` and ``pids`` in ``cgroup.subtree_control``), else the cgroup v1
``memory``, ``pids`` and ``cpu`` hierarchies where we may create directories (root). A
session's cgroup (``SessionCgroup.create``) is a child of this process's own cgroup in each
hierarchy, with the memory limit (swap included where the kernel accounts it), the process
limit and one CPU's worth of CPU time; the session's init is moved into it before it starts
anything, so every process of the session lands there. ``remove`` deletes it once the session
is gone. Nothing is used (and ``describe`` says why) when no hierarchy is writable, e.g.
unprivileged without a delegated cgroup v2 subtree.

It does NOT account kernel memory of the session's tmpfs layer to the session beyond what the
kernel itself charges. A cgroup whose process died before ``remove`` (or never called it)
stays until the next ``create`` under the same parent finds it empty and older than a minute
(``sweep``).
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from dataclasses import dataclass, field
from functools import cache


def _mounts() -> list[tuple[str, str, str]]:
    """(mount point, fstype, super options) of every cgroup mount."""
    found = []
    with open("/proc/self/mountinfo") as fh:
        for line in fh:
            pre, _, post = line.partition(" - ")
            fstype, _, opts = post.split()[:3]
            if fstype in ("cgroup", "cgroup2"):
                found.append((pre.split()[4], fstype, opts))
    return found


def _own() -> dict[str, str]:
    """Controller (or ``""`` for v2) -> this process's cgroup path."""
    own: dict[str, str] = {}
    with open("/proc/self/cgroup") as fh:
        for line in fh:
            _, ctrls, path = line.rstrip("\n").split(":", 2)
            for c in ctrls.split(",") if ctrls else [""]:
                own[c] = path
    return own


def _writable(d: str) -> bool:
    probe = os.path.join(d, f"tasksieve-probe-{uuid.uuid4().hex[:8]}")
    try:
        os.mkdir(probe)
    except OSError:
        return False
    os.rmdir(probe)
    return True


@cache
def probe() -> tuple[str, dict[str, str]]:
    """("v2", {"": dir}) or ("v1", {controller: dir}) under which to create session cgroups,
    or ("none: why", {})."""
    own, mounts = _own(), _mounts()
    for point, fstype, _ in mounts:
        if fstype == "cgroup2" and "" in own:
            d = os.path.normpath(point + own[""])
            try:
                with open(os.path.join(d, "cgroup.subtree_control")) as fh:
                    ctrl = fh.read().split()
            except OSError:
                continue
            if {"memory", "pids"} <= set(ctrl) and _writable(d):
                return "v2", {"": d}
    dirs: dict[str, str] = {}
    for point, fstype, opts in mounts:
        if fstype != "cgroup":
            continue
        for c in ("memory", "pids", "cpu"):
            if c in opts.split(",") and c in own and c not in dirs:
                d = os.path.normpath(point + own[c])
                if _writable(d):
                    dirs[c] = d
    if {"memory", "pids"} <= set(dirs):
        return "v1", dirs
    return "none: no writable cgroup v2 subtree delegating memory and pids, nor cgroup v1", {}


STALE_S = 60.0  # an empty cgroup of ours this old was left by a process that died


def sweep(bases: dict[str, str], now: float | None = None) -> int:
    """Remove the empty ``tasksieve-ws-*`` and ``tasksieve-fs-*`` cgroups under ``bases`` that
    are older than ``STALE_S``: left by a process that ended without removing its own (a
    sandbox never closed, a host killed). A live one is never empty (its session's init or
    its server is in it from the moment it is made, within ``STALE_S``), and the kernel
    refuses to remove one that is not; every failure is ignored. Returns how many went."""
    now = time.time() if now is None else now
    gone = 0
    for base in bases.values():
        with contextlib.suppress(OSError):
            for name in os.listdir(base):
                d = os.path.join(base, name)
                if not name.startswith(("tasksieve-ws-", "tasksieve-fs-")):
                    continue
                with contextlib.suppress(OSError):
                    if now - os.stat(d).st_mtime < STALE_S:
                        continue
                    with open(os.path.join(d, "cgroup.procs")) as fh:
                        if fh.read().strip():
                            continue
                    os.rmdir(d)
                    gone += 1
    return gone


def _put(path: str, value: str) -> None:
    with open(path, "w") as fh:
        fh.write(value)


@dataclass
class SessionCgroup:
    """One session's cgroup directories (one per hierarchy)."""

    dirs: list[str] = field(default_factory=list)
    procs: list[str] = field(default_factory=list)

    @classmethod
    def create(
        cls, memory_bytes: int, pids: int, cpu: bool = True, prefix: str = "tasksieve-ws"
    ) -> SessionCgroup | None:
        """A new cgroup with these limits (and, with ``cpu``, one CPU), or None where none is
        available."""
        kind, bases = probe()
        if not bases:
            return None
        sweep(bases)
        name = f"{prefix}-{uuid.uuid4().hex[:12]}"
        group = cls()
        try:
            if kind == "v2":
                d = os.path.join(bases[""], name)
                os.mkdir(d)
                group.dirs.append(d)
                _put(f"{d}/memory.max", str(memory_bytes))
                with contextlib.suppress(OSError):
                    _put(f"{d}/memory.swap.max", "0")
                _put(f"{d}/pids.max", str(pids))
                with contextlib.suppress(OSError):
                    if cpu:
                        _put(f"{d}/cpu.max", "100000 100000")
                group.procs.append(f"{d}/cgroup.procs")
                return group
            for c, base in bases.items():
                if c == "cpu" and not cpu:
                    continue
                d = os.path.join(base, name)
                os.mkdir(d)
                group.dirs.append(d)
                group.procs.append(f"{d}/cgroup.procs")
                if c == "memory":
                    _put(f"{d}/memory.limit_in_bytes", str(memory_bytes))
                    with contextlib.suppress(OSError):
                        _put(f"{d}/memory.memsw.limit_in_bytes", str(memory_bytes))
                elif c == "pids":
                    _put(f"{d}/pids.max", str(pids))
                else:
                    _put(f"{d}/cpu.cfs_period_us", "100000")
                    _put(f"{d}/cpu.cfs_quota_us", "100000")
        except OSError:
            group.remove()
            return None
        return group

    def add(self, pid: int) -> None:
        """Move ``pid`` (the session's init, before it starts anything) into the cgroup."""
        for procs in self.procs:
            _put(procs, str(pid))

    def oom_kills(self) -> int | None:
        """How many processes the kernel's out-of-memory killer took in this cgroup so far."""
        for d in self.dirs:
            for name in ("memory.events", "memory.oom_control"):  # v2, v1
                with contextlib.suppress(OSError, ValueError), open(os.path.join(d, name)) as fh:
                    for line in fh:
                        key, _, value = line.partition(" ")
                        if key == "oom_kill":
                            return int(value)
        return None

    def add_back(self, pid: int) -> None:
        """Move ``pid`` back into the cgroup this one was made under."""
        for procs in self.procs:
            _put(os.path.join(os.path.dirname(os.path.dirname(procs)), "cgroup.procs"), str(pid))

    def remove(self) -> None:
        """Delete the directories (once the session's processes are gone)."""
        for d in reversed(self.dirs):
            with contextlib.suppress(OSError):
                os.rmdir(d)
        self.dirs = []


def describe() -> str:
    """What bounds a session's processes together: ``cgroup v2``, ``cgroup v1`` or why none."""
    kind, _ = probe()
    return f"cgroup {kind}" if kind in ("v1", "v2") else kind
