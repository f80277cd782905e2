"""Reclaiming a sandbox's processes: wait until a pid namespace is really empty.

Killing the host-side launcher (bwrap, unshare) of a run only starts the teardown: the
namespace's init dies of its parent-death signal and the kernel then kills the rest. When
an init has exited its whole pid namespace is gone (the kernel reaps every other member
before it reports the init's exit), so ``inits_of`` takes pidfds of the launcher's children
(the inits) before the kill and ``wait_gone`` waits on them. ``Keeper`` starts processes from
one thread that lives as long as they should: a parent-death signal fires when the thread
that forked the child exits, not the process.

It does NOT reclaim a process that left the namespace (none can: entering another pid
namespace needs privileges the runs do not have), and it gives up after the timeout it is
given (a process stuck in uninterruptible sleep outlives any SIGKILL).
"""

from __future__ import annotations

import contextlib
import os
import queue
import select
import subprocess
import threading
import time
from collections.abc import Callable
from typing import Any


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
        ready, _, _ = select.select(left, [], [], wait)
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
