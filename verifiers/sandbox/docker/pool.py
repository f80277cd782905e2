"""A warm pool of hardened, long-lived sandbox containers, each serving one execution at a time.

Every container runs ``docker_server`` as PID 1 (stdio attached by the host, no logging
driver) and one ``docker_writer`` exec as root without capabilities, with no network, a
read-only root, all capabilities dropped, ``no-new-privileges``, pids/memory/CPU limits, uid
65534, a private IPC namespace without ``/dev/shm`` and one size-limited tmpfs at
``/scratch``; no host mounts. Starting a container costs one create, one start, one attach
and one exec; a run costs none (only messages on the two streams). After each run the server
kills whatever the run left and reports what remains; a container whose run hit a limit, left
stray processes, files outside its run dir, POSIX message queues or SysV IPC objects, or
whose stream broke, is removed and replaced in the background. It does NOT guard against
kernel exploits beyond Docker's default seccomp profile, covert channels through shared host
resources (CPU caches, timing), or containers leaked by a process that dies without
``close()`` on a remote engine (local leftovers from dead processes are swept at start).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tasksieve.verifiers.sandbox.docker.channel import Channel, attach, exec_channel
from tasksieve.verifiers.sandbox.docker.guest import server as docker_server
from tasksieve.verifiers.sandbox.docker.guest import writer as docker_writer
from tasksieve.verifiers.sandbox.guest import bundle
from tasksieve.verifiers.sandbox.warm import warm_sources

LABEL = "tasksieve.sandbox"
OWNER = "tasksieve.owner"
SCRATCH = "/scratch"
USER = "65534:65534"
SERVER_SOURCE = bundle(docker_server.__file__)
WRITER_SOURCE = bundle(docker_writer.__file__)
# Imported by the server before it forks its zygote, so warm runs start without import costs.
PREIMPORT = ("ast", "base64", "builtins", "contextlib", "json", "math", "traceback", "types")
_START_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Shape:
    """The per-container limits that can only be set when a container is created."""

    memory_mb: int
    scratch_mb: int
    max_processes: int
    cpus: float


@dataclass
class Slot:
    """One pooled container, the shape it was created with and its two streams."""

    container_id: str
    shape: Shape
    server: Channel
    writer: Channel
    settle: Callable[[], bool] | None = None  # the last run's cleanup verdict, read lazily
    warm: int = 0  # how many registered warm scripts its server compiled at start


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
            self._remove(s)
        for t in workers:
            t.join(timeout=30)

    # ------------------------------------------------------------------ acquire / release
    def acquire(self, shape: Shape) -> Slot:
        """The longest-idle clean container of ``shape``, or a fresh one when none is idle.

        A container's last run is settled here (its cleanup report read, normally long
        arrived); one that was not left clean is recycled and the next one tried. One started
        before more warm scripts were registered is retired, so runs of those scripts run warm
        (as the fork server restarts for them).
        """
        while True:
            with self._lock:
                if self._closed:
                    raise RuntimeError("docker sandbox is closed")
                group = self._idle.get(shape)
                slot = group.pop(0) if group else None
                self._busy += 1
            if slot is None:
                break
            if slot.warm != len(warm_sources()):
                self._retire(slot)
                continue
            if _settled(slot):
                return slot
            self.release(slot, dirty=True)
        try:
            return self._create(shape)
        except BaseException:
            with self._lock:
                self._busy -= 1
            raise

    def flush(self) -> int:
        """Settle every idle container now (recycling unclean ones); how many were recycled."""
        with self._lock:
            slots = [s for g in self._idle.values() for s in g]
            self._idle.clear()
            self._busy += len(slots)
        recycled = 0
        for slot in slots:
            recycled += self.release(slot, dirty=not _settled(slot))
        return recycled

    def release(self, slot: Slot, dirty: bool, settle: Callable[[], bool] | None = None) -> bool:
        """Hand ``slot`` back after a run, or recycle it when ``dirty``; True when recycled.

        ``settle`` (run at the next ``acquire``) says whether the run left the container clean.
        """
        slot.settle = settle
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

    # ------------------------------------------------------------------ internals
    def _count(self) -> int:
        return self._busy + sum(len(g) for g in self._idle.values())

    def _add(self, shape: Shape) -> None:
        slot = self._create(shape)
        with self._lock:
            if self._closed:
                closed = True
            else:
                closed = False
                self._idle.setdefault(shape, []).append(slot)
        if closed:
            self._remove(slot)

    def _replace(self, slot: Slot, refill: bool) -> None:
        self._remove(slot)
        if refill:
            with contextlib.suppress(Exception):
                self._add(slot.shape)

    def _retire(self, slot: Slot) -> None:
        """Remove an acquired ``slot`` in the background without counting it as recycled."""
        with self._lock:
            self._busy -= 1
            t = threading.Thread(target=self._remove, args=(slot,), daemon=True)
            self._workers = [w for w in self._workers if w.is_alive()] + [t]
        t.start()

    def _remove(self, slot: Slot) -> None:
        slot.server.close()
        slot.writer.close()
        self._remove_id(slot.container_id)

    def _remove_id(self, cid: str) -> None:
        with contextlib.suppress(Exception):
            self.api.remove_container(cid, force=True)

    def _create(self, shape: Shape) -> Slot:
        """Start a container, attach to its server, start its writer and wait for both."""
        mem = (shape.memory_mb + shape.scratch_mb + 96) * 1024 * 1024
        host = self.api.create_host_config(
            network_mode="none",
            read_only=True,
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            pids_limit=shape.max_processes + 3,  # + the server, its zygote and the writer
            mem_limit=mem,
            memswap_limit=mem,
            nano_cpus=int(shape.cpus * 1e9),
            tmpfs={SCRATCH: f"size={shape.scratch_mb}m,mode=1777,nosuid,nodev"},
            ipc_mode="none",
            log_config={"type": "none", "config": {}},
            auto_remove=False,
        )
        name = f"tasksieve-sbx-{self._tag}-{next(self._names)}"
        c = self.api.create_container(
            self.image,
            command=["python3", "-I", "-S", "-c", SERVER_SOURCE],
            user=USER,
            working_dir=SCRATCH,
            network_disabled=True,
            host_config=host,
            labels={LABEL: "1", OWNER: self._tag},
            name=name,
            environment={"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"},
            stdin_open=True,
            tty=False,
        )
        cid = str(c["Id"])
        server: Channel | None = None
        writer: Channel | None = None
        try:
            self.api.start(cid)
            server = attach(self.api, cid)
            warm = warm_sources()
            server.send({"op": "hello", "warm": warm, "preimport": list(PREIMPORT)})
            writer = exec_channel(
                self.api, cid, ["python3", "-I", "-S", "-c", WRITER_SOURCE], user="0:0"
            )
            writer.send({"op": "ping"})
            server.recv_json(b"h", _START_TIMEOUT_S)
            writer.recv_json(b"f", _START_TIMEOUT_S)
        except BaseException:
            for ch in (server, writer):
                if ch is not None:
                    ch.close()
            self._remove_id(cid)
            raise
        self.created += 1
        return Slot(cid, shape, server, writer, warm=len(warm))


def _settled(slot: Slot) -> bool:
    """Read ``slot``'s pending cleanup report; True when its last run left it clean."""
    settle, slot.settle = slot.settle, None
    try:
        return settle is None or settle()
    except Exception:
        return False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
