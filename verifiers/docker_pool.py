"""A warm pool of hardened, long-lived sandbox containers, each serving one execution at a time.

Every container runs a tiny zombie reaper as PID 1 with no network, a read-only root, all
capabilities dropped, ``no-new-privileges``, pids/memory/CPU limits, uid 65534, a private IPC
namespace without ``/dev/shm`` and one size-limited tmpfs at ``/scratch``; no host mounts.
After each execution ``release`` kills every process of the run (repeated ``kill -STOP/-KILL
-1`` as uid 65534, which spares only PID 1), removes its run dir and checks what is left; a
container that hit a limit, had stray processes, files outside its run dir, POSIX message
queues or SysV IPC objects is removed and replaced in the background. It does NOT guard
against kernel exploits beyond Docker's default seccomp profile, covert channels through
shared host resources (CPU caches, timing), or containers leaked by a process that dies
without ``close()`` on a remote engine (local leftovers from dead processes are swept at start).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
import uuid
from dataclasses import dataclass
from typing import Any

LABEL = "tasksieve.sandbox"
OWNER = "tasksieve.owner"
SCRATCH = "/scratch"
USER = "65534:65534"
# PID 1: reaps orphans (so killed runs leave no zombies) and, being the namespace's init,
# is the one process ``kill -1`` spares; it ignores signals it has no handler for.
REAPER = r"""
import os, signal
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
while True:
    signal.sigwait({signal.SIGCHLD})
    try:
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass
    except ChildProcessError:
        pass
"""
# Counts processes other than PID 1 and itself, kills them until none is left (STOP first so
# nothing forks in between), removes what uid 65534 can of the run dir (its root-owned input
# files go at the next setup), then reports "procs_before procs_after leftovers sysvipc_lines".
CLEANUP = r"""
d="$1"
count() {
  m=0; for p in /proc/[0-9]*; do p=${p#/proc/}; [ "$p" = 1 ] || [ "$p" = $$ ] || m=$((m+1)); done
}
count; n=$m; i=0
while [ $m -gt 0 ] && [ $i -lt 300 ]; do
  kill -STOP -1 2>/dev/null; kill -KILL -1 2>/dev/null; i=$((i+1)); count
done
left=0
if [ -n "$d" ]; then
  rm -rf "$d" 2>/dev/null
  left=$(find "$d" ! -user 0 2>/dev/null | wc -l)
fi
other=$( (ls -A /scratch | grep -vxF "${d##*/}"; ls -A /dev/mqueue) 2>/dev/null | wc -l)
ipc=$(cat /proc/sysvipc/shm /proc/sysvipc/msg /proc/sysvipc/sem 2>/dev/null | wc -l)
echo "$n $m $((left + other)) $ipc"
"""


@dataclass(frozen=True)
class Shape:
    """The per-container limits that can only be set when a container is created."""

    memory_mb: int
    scratch_mb: int
    max_processes: int
    cpus: float


@dataclass
class Slot:
    """One pooled container and the shape it was created with."""

    container_id: str
    shape: Shape


class Pool:
    """Creates, hands out, cleans and recycles sandbox containers of one image."""

    def __init__(self, client: Any, image: str, size: int) -> None:
        self.client, self.api, self.image, self.size = client, client.api, image, size
        self._idle: dict[Shape, list[Slot]] = {}
        self._lock = threading.Lock()
        self._busy = 0
        self._closed = False
        self._workers: list[threading.Thread] = []
        self._names = itertools.count()
        self._tag = f"{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.recycled = 0
        self.created = 0

    # ------------------------------------------------------------------ lifecycle
    def warm(self, shape: Shape, n: int) -> None:
        """Start ``n`` containers of ``shape`` in parallel and add them to the pool."""
        threads = [threading.Thread(target=self._add, args=(shape,)) for _ in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def sweep(self) -> int:
        """Remove sandbox containers left by processes on this host that no longer exist."""
        removed = 0
        for c in self.api.containers(all=True, filters={"label": LABEL}):
            owner = str(c.get("Labels", {}).get(OWNER, ""))
            pid = int(owner.split("-")[0]) if owner.split("-")[0].isdigit() else 0
            if pid and pid != os.getpid() and not _alive(pid):
                with contextlib.suppress(Exception):
                    self.api.remove_container(c["Id"], force=True)
                    removed += 1
        return removed

    def close(self) -> None:
        """Remove every container of this pool (idle ones now, busy ones on release)."""
        with self._lock:
            self._closed = True
            slots = [s for group in self._idle.values() for s in group]
            self._idle.clear()
            workers = list(self._workers)
        for s in slots:
            self._remove(s.container_id)
        for t in workers:
            t.join(timeout=30)

    # ------------------------------------------------------------------ acquire / release
    def acquire(self, shape: Shape) -> Slot:
        """An idle container of ``shape``, or a fresh one when none is idle."""
        with self._lock:
            if self._closed:
                raise RuntimeError("docker sandbox is closed")
            group = self._idle.get(shape)
            slot = group.pop() if group else None
            self._busy += 1
        if slot is None:
            try:
                slot = Slot(self._create(shape), shape)
            except BaseException:
                with self._lock:
                    self._busy -= 1
                raise
        return slot

    def release(self, slot: Slot, run_dir: str | None, dirty: bool, strict: bool) -> bool:
        """Clean ``slot`` after a run; return True when it had to be recycled.

        ``strict``: the run's main process has exited, so any process still there is a stray.
        """
        if not dirty:
            dirty = not self.clean(slot, run_dir, strict)
        with self._lock:
            self._busy -= 1
            keep = not dirty and not self._closed
            if keep:
                self._idle.setdefault(slot.shape, []).append(slot)
                return False
            if dirty:
                self.recycled += 1
            refill = not self._closed and self._count() < self.size
            t = threading.Thread(target=self._replace, args=(slot, refill), daemon=True)
            self._workers = [w for w in self._workers if w.is_alive()] + [t]
        t.start()
        return dirty

    def clean(self, slot: Slot, run_dir: str | None, strict: bool) -> bool:
        """Kill the run's processes and remove its dir; True when nothing else was left."""
        try:
            out = self.exec_output(slot, ["sh", "-c", CLEANUP, "cleanup", run_dir or ""])
            before, after, left, ipc = (int(x) for x in out.split())
        except Exception:
            return False
        return after == 0 and left == 0 and ipc <= 3 and not (strict and before > 0)

    def kill_all(self, slot: Slot) -> None:
        """Kill every process in ``slot`` except its init (best effort, returns quickly)."""
        with contextlib.suppress(Exception):
            self.exec_output(slot, ["sh", "-c", "kill -STOP -1; kill -KILL -1"])

    def exec_output(self, slot: Slot, cmd: list[str]) -> str:
        """Run a short helper command as the sandbox user and return its stdout."""
        eid = self.api.exec_create(slot.container_id, cmd, user=USER, stdin=False)["Id"]
        out = self.api.exec_start(eid)
        return out.decode(errors="replace") if isinstance(out, bytes) else str(out)

    # ------------------------------------------------------------------ internals
    def _count(self) -> int:
        return self._busy + sum(len(g) for g in self._idle.values())

    def _add(self, shape: Shape) -> None:
        slot = Slot(self._create(shape), shape)
        with self._lock:
            if self._closed:
                closed = True
            else:
                closed = False
                self._idle.setdefault(shape, []).append(slot)
        if closed:
            self._remove(slot.container_id)

    def _replace(self, slot: Slot, refill: bool) -> None:
        self._remove(slot.container_id)
        if refill:
            with contextlib.suppress(Exception):
                self._add(slot.shape)

    def _remove(self, cid: str) -> None:
        with contextlib.suppress(Exception):
            self.api.remove_container(cid, force=True)

    def _create(self, shape: Shape) -> str:
        mem = (shape.memory_mb + shape.scratch_mb + 64) * 1024 * 1024
        host = self.api.create_host_config(
            network_mode="none",
            read_only=True,
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            pids_limit=shape.max_processes + 1,  # + the reaper
            mem_limit=mem,
            memswap_limit=mem,
            nano_cpus=int(shape.cpus * 1e9),
            tmpfs={SCRATCH: f"size={shape.scratch_mb}m,mode=1777,nosuid,nodev"},
            ipc_mode="none",
            auto_remove=False,
        )
        name = f"tasksieve-sbx-{self._tag}-{next(self._names)}"
        c = self.api.create_container(
            self.image,
            command=["python3", "-I", "-S", "-c", REAPER],
            user=USER,
            working_dir=SCRATCH,
            network_disabled=True,
            host_config=host,
            labels={LABEL: "1", OWNER: self._tag},
            name=name,
            environment={"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"},
        )
        cid = str(c["Id"])
        try:
            self.api.start(cid)
        except BaseException:
            self._remove(cid)
            raise
        self.created += 1
        return cid


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
