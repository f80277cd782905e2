"""Per-run unprivileged uids for root mode: never shared by two live runs on this machine.

RLIMIT_NPROC counts processes per uid, so two runs sharing a uid share one process budget (a
fork bomb in one would starve the other's ``exec``), and a uid still owning processes must
not be handed out again. ``UidPool`` hands out uids from a block of 65,536 that this host
process owns: the block is claimed with an exclusive ``flock`` on a slot file, so concurrent
tasksieve processes (pipeline workers, the CLI, tests) never draw from the same block, and a
block is freed by the kernel when its process dies. A uid comes back to the pool only once
the run's pid namespace is known to be empty (the caller decides; a run whose reclamation
timed out keeps its uid out of the pool for good).

It does NOT coordinate with other software that uses uids in the same range (1,300,000 and
up); if every slot is taken (256 concurrent processes) it falls back to a block chosen by pid.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import os
import tempfile
import threading

BASE = 1_300_000
BLOCK = 65536
SLOTS = 256
_SLOT_DIRS = (
    "/run/tasksieve-uid-slots",
    os.path.join(tempfile.gettempdir(), "tasksieve-uid-slots"),
)


def claim_slot() -> tuple[int, int | None]:
    """(slot, fd holding its lock); the fd is None when no slot file could be locked."""
    for d in _SLOT_DIRS:
        try:
            os.makedirs(d, mode=0o700, exist_ok=True)
        except OSError:
            continue
        start = os.getpid() % SLOTS  # start apart so processes rarely contend for one slot
        for i in range(SLOTS):
            slot = (start + i) % SLOTS
            try:
                fd = os.open(
                    os.path.join(d, str(slot)), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600
                )
            except OSError:
                break
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                continue
            return slot, fd
    return os.getpid() % SLOTS, None


class UidPool:
    """Hands out unprivileged uids, never one still in use (see the module doc)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._base: int | None = None
        self._pid = -1
        self._fd: int | None = None
        self._used: set[int] = set()
        self._next = itertools.count()

    def _block(self) -> int:
        if self._base is None or self._pid != os.getpid():  # first use, or a forked child
            if self._fd is not None and self._pid != os.getpid():
                with contextlib.suppress(OSError):
                    os.close(self._fd)  # the parent's lock is the parent's
            slot, self._fd = claim_slot()
            self._base, self._pid = BASE + slot * BLOCK, os.getpid()
            self._used = set()
        return self._base

    def take(self) -> int:
        """A uid not currently handed out."""
        with self._lock:
            base = self._block()
            for _ in range(BLOCK):
                uid = base + next(self._next) % BLOCK
                if uid not in self._used:
                    self._used.add(uid)
                    return uid
        raise RuntimeError("no free sandbox uid")

    def give(self, uid: int) -> None:
        """Return ``uid`` to the pool (only once none of its processes exists)."""
        with self._lock:
            self._used.discard(uid)


UIDS = UidPool()
