"""A memory cgroup around the fork server and every run it forks, where the host allows one.

Each run's processes are bounded by rlimits, but ``RLIMIT_AS`` does not count memory a
process holds outside its address space: the pages of a ``memfd`` or of a tmpfs file it wrote
and unmapped, socket and pipe buffers, SysV objects (bounded per IPC namespace by
``guest/ipclimits.py``), kernel objects. Without a cgroup, one hostile run could take the
machine's memory that way within its wall limit. As root where ``cgroups.probe`` finds a
writable hierarchy, ``confine`` puts the server's whole process tree (its bubblewrap, the
namespace's init, the server) into a cgroup of its own with a memory limit, before the server
takes a request, so every run it forks lands there too; the kernel's out-of-memory killer then
acts inside that cgroup and never outside it.

Every job raises its ``oom_score_adj`` to 1000 (tests processes to 500) before it drops its
uid (``guest/nsutil.oom_adjust``), so the killer picks a run's process, a candidate before a
tests process, before the server or an entry's init. Where this process holds
CAP_SYS_RESOURCE the server gets it too (``server_caps``): it sets its own score to -1000, and
a job's write, made while it still holds the capability, also sets the lowest score it may
return to. Without it (``state`` says so) a job can lower its score back to the server's 0
once it is dumpable (after an ``execve``, or through ``prctl``); it can then make the server
the victim, which the host restarts: the runs in flight end with an infrastructure error,
and the machine outside the cgroup is still unharmed.

The limit (``ProcessSandbox(server_memory_mb=...)``; a negative value: no cgroup) is half the
machine's memory by default, swap excluded: it bounds what one server's runs hold together,
whatever way they hold it, and each sandbox's server has its own.

It does NOT: remove the cgroup when this process dies without ``close()`` (the empty
directory stays until a later sandbox's start sweeps it, ``cgroups.sweep``); bound anything
unprivileged or without a writable cgroup hierarchy (``state`` says why, as
``describe()["server_cgroup"]``); choose among runs fairly: when the runs of one server
exceed its limit together, the killer takes the process with the largest resident memory
among those with the highest score, which may belong to another run than the one holding
memory outside its address space.
"""

from __future__ import annotations

import contextlib
import os

from tasksieve.verifiers.sandbox.process.cgroups import SessionCgroup


def default_memory_bytes() -> int:
    """Half of the machine's memory (``MemTotal``), the server's default limit."""
    with open("/proc/meminfo") as fh:
        for line in fh:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024 // 2
    return 4 << 30


_CAP_SYS_RESOURCE = 24
_UNHELD = ", runs may lower their oom_score_adj to the server's (no CAP_SYS_RESOURCE)"


def server_caps(caps: tuple[str, ...]) -> tuple[str, ...]:
    """``caps`` plus CAP_SYS_RESOURCE where this process holds it: with it the server sets its
    own ``oom_score_adj`` to -1000, and each job's write of its own (before it drops its uid)
    also sets the lowest it may return to, so no run can lower it again."""
    with open("/proc/self/status") as fh:
        eff = next((ln.split()[1] for ln in fh if ln.startswith("CapEff:")), "0")
    return (*caps, "CAP_SYS_RESOURCE") if int(eff, 16) >> _CAP_SYS_RESOURCE & 1 else caps


def tree(pid: int) -> list[int]:
    """``pid`` and its live descendants, parents first."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop(0)
        out.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as fh:
                    todo += [int(k) for k in fh.read().split()]
        except (OSError, ValueError):
            continue
    return out


class ServerCgroup:
    """The fork server's cgroup (or why it has none), made by ``confine``."""

    def __init__(self, group: SessionCgroup | None, state: str) -> None:
        self.group, self.state = group, state

    @classmethod
    def confine(cls, pid: int, memory_bytes: int) -> ServerCgroup:
        """Move the process tree of ``pid`` (bubblewrap, started as root) into a new cgroup."""
        if memory_bytes < 0:
            return cls(None, "none: disabled (server_memory_mb < 0)")
        if os.geteuid() != 0:
            return cls(None, "none: unprivileged")
        group = SessionCgroup.create(memory_bytes, 1 << 16, cpu=False, prefix="tasksieve-fs")
        if group is None:
            return cls(None, "none: no writable cgroup hierarchy")
        procs = tree(pid)
        try:
            for p in procs:
                group.add(p)
        except OSError as e:
            for p in procs:  # back where they were: a cgroup half-made is removed
                with contextlib.suppress(OSError):
                    group.add_back(p)
            group.remove()
            return cls(None, f"none: {e}")
        held = "CAP_SYS_RESOURCE" in server_caps(())
        return cls(group, f"memory limit {memory_bytes >> 20} MB" + ("" if held else _UNHELD))

    def oom_kills(self) -> int | None:
        """Out-of-memory kills in the server's cgroup so far (None without a cgroup)."""
        return None if self.group is None else self.group.oom_kills()

    def remove(self) -> None:
        """Delete the cgroup (once every process of the server is gone)."""
        if self.group is not None:
            self.group.remove()
            self.group, self.state = None, "none: the server stopped"
