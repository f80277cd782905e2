"""Reclaiming a sandbox's processes: wait until a pid namespace is really empty.

Killing the host-side launcher (bwrap, unshare) of a run only starts the teardown: the
namespace's init dies of its parent-death signal and the kernel then kills the rest. When
an init has exited its whole pid namespace is gone (the kernel reaps every other member
before it reports the init's exit), so ``inits_of`` takes pidfds of the launcher's children
(the inits) before the kill and ``wait_gone`` waits on them. bubblewrap reports its init on
``--info-fd`` (``init_from_info``): the host then holds the init's pidfd from spawn on and
kills the init itself, so a run killed while bwrap is still setting up (before the init has
bound itself to the launcher's death) cannot leave a namespace behind. ``Keeper`` starts
processes from one thread that lives as long as they should: a parent-death signal fires when
the thread that forked the child exits, not the process.

It does NOT reclaim a process that left the namespace (none can: entering another pid
namespace needs privileges the runs do not have), and it gives up after the timeout it is
given (a process stuck in uninterruptible sleep outlives any SIGKILL).
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import select
import subprocess
import threading
import time
from collections.abc import Callable
from typing import Any


def _readable(fds: list[int], timeout: float) -> list[int]:
    """The descriptors of ``fds`` readable within ``timeout`` seconds (``poll``: unlike
    ``select`` it takes descriptors above 1023, which a host holding many sessions has)."""
    poller = select.poll()
    for fd in fds:
        poller.register(fd, select.POLLIN)
    return [fd for fd, _ in poller.poll(max(timeout, 0.0) * 1000)]


def inits_of(pid: int) -> list[int]:
    """Pidfds of the live children of ``pid`` (empty when it has none or has exited)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as fh:
            kids = [int(k) for k in fh.read().split()]
    except (OSError, ValueError):
        return []
    fds: list[int] = []
    for kid in kids:
        with contextlib.suppress(OSError):
            fds.append(os.pidfd_open(kid))
    return fds


def wait_gone(pidfds: list[int], timeout: float) -> bool:
    """Wait until every process behind ``pidfds`` has exited, then close them; True if all did."""
    end = time.monotonic() + timeout
    left = list(pidfds)
    while left:
        wait = end - time.monotonic()
        if wait <= 0:
            break
        ready = _readable(left, wait)
        left = [f for f in left if f not in ready]
    for f in pidfds:
        with contextlib.suppress(OSError):
            os.close(f)
    return not left


class Keeper:
    """One thread that starts processes and stays alive until ``stop`` (see module doc)."""

    def __init__(self) -> None:
        self._jobs: queue.Queue[tuple[Callable[[], Any], queue.Queue[Any]] | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def popen(self, *args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
        """``subprocess.Popen(*args, **kwargs)``, forked from the keeper thread."""
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, daemon=True, name="sbx-keeper")
                self._thread.start()
        reply: queue.Queue[Any] = queue.Queue()
        self._jobs.put((lambda: subprocess.Popen(*args, **kwargs), reply))
        ok, value = reply.get()
        if not ok:
            raise value
        return value  # type: ignore[no-any-return,unused-ignore]

    def _loop(self) -> None:
        while (job := self._jobs.get()) is not None:
            fn, reply = job
            try:
                reply.put((True, fn()))
            except BaseException as e:  # handed to the caller, which re-raises it
                reply.put((False, e))

    def stop(self) -> None:
        """End the thread (processes it started then get their parent-death signal)."""
        with self._lock:
            if self._thread is not None:
                self._jobs.put(None)
                self._thread.join()
                self._thread = None


def init_from_info(info_fd: int, launcher: int, timeout: float) -> int | None:
    """A pidfd of the namespace init bubblewrap reports on ``--info-fd`` (closes the fd).

    bwrap writes ``{"child-pid": N, ...}`` right after it clones the init, then closes the
    fd. None when the launcher ended before cloning, or the init already exited. The pidfd
    is checked to belong to a child of ``launcher``, so a recycled pid is never signalled.
    """
    buf = b""
    end = time.monotonic() + timeout
    try:
        while (left := end - time.monotonic()) > 0:
            ready = _readable([info_fd], left)
            if not ready:
                break
            chunk = os.read(info_fd, 4096)
            if not chunk:
                break
            buf += chunk
    except OSError:
        pass
    finally:
        os.close(info_fd)
    found = re.search(rb'"child-pid"\s*:\s*(\d+)', buf)
    if found is None:
        return None
    pid = int(found.group(1))
    try:
        fd = os.pidfd_open(pid)
    except OSError:
        return None
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            ppid = int(fh.read().rsplit(b")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        ppid = -1
    if ppid != launcher:  # exited and reaped (a pid reused since is not ours)
        os.close(fd)
        return None
    return fd
