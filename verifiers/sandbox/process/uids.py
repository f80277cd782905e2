"""Per-run unprivileged uids for the fork server: never shared by two live runs on this machine.

RLIMIT_NPROC counts processes per uid, so two runs sharing a uid share one process budget (a
fork bomb in one would starve the other's ``exec``), and a uid still owning processes must
not be handed out again. ``UidPool`` hands out uids from a block of 65,536 that this host
process owns: the block is claimed with an exclusive ``flock`` on a slot file, so concurrent
tasksieve processes (pipeline workers, the CLI, tests) never draw from the same block, and a
block is freed by the kernel when its process dies. A uid comes back to the pool only once
the run's pid namespace is known to be empty (the caller decides; a run whose reclamation
timed out keeps its uid out of the pool for good).

Unprivileged (the fork server in a user namespace, see ``userns.py``) the uids are the
namespace's: ``INNER_BASE`` and up, mapped onto a block of the caller's subordinate range
(``/etc/subuid`` and ``/etc/subgid``). Blocks of that range are claimed the same way, with a
slot file per user, so two tasksieve processes of one user map disjoint host uids and
RLIMIT_NPROC (counted per host uid) stays per run.

It does NOT coordinate with other software that uses uids in the same range (1,300,000 and
up as root; the caller's subordinate range unprivileged, which rootless containers of the
same user may use too); if every slot is taken (256 concurrent processes) it falls back to a
block chosen by pid.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import os
import pwd
import tempfile
import threading
from dataclasses import dataclass

BASE = 1_300_000
BLOCK = 65536
SLOTS = 256
INNER_BASE = 1000  # the first uid a run gets inside the unprivileged server's namespace
USERNS_BLOCK = 4096  # uids per process unprivileged (at most: a smaller range is one block)
MIN_BLOCK = 64  # a subordinate range smaller than this is not used


def _slot_dirs() -> tuple[str, ...]:
    tmp = tempfile.gettempdir()
    if os.geteuid() == 0:
        return ("/run/tasksieve-uid-slots", os.path.join(tmp, "tasksieve-uid-slots"))
    return (os.path.join(tmp, f"tasksieve-uid-slots-{os.geteuid()}"),)


@dataclass(frozen=True)
class SubRange:
    """One block of the caller's subordinate ids that this process maps (unprivileged)."""

    uid: int  # first host uid of the block
    gid: int  # first host gid of the block
    count: int  # ids in the block, mapped to INNER_BASE and up


def subordinate(path: str, uid: int) -> tuple[int, int] | None:
    """The first range (start, count) of ``path`` (``/etc/subuid`` format) for ``uid``.

    Entries name the user or its number; a range shorter than ``MIN_BLOCK`` is skipped.
    """
    try:
        names = {str(uid), pwd.getpwuid(uid).pw_name}
    except KeyError:
        names = {str(uid)}
    try:
        with open(path, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.strip().split(":")
        if len(parts) != 3 or parts[0] not in names:
            continue
        try:
            start, count = int(parts[1]), int(parts[2])
        except ValueError:
            continue
        if start > 0 and count >= MIN_BLOCK:
            return start, count
    return None


def claim_slot(slots: int = SLOTS) -> tuple[int, int | None]:
    """(slot, fd holding its lock); the fd is None when no slot file could be locked."""
    for d in _slot_dirs():
        try:
            os.makedirs(d, mode=0o700, exist_ok=True)
        except OSError:
            continue
        start = os.getpid() % slots  # start apart so processes rarely contend for one slot
        for i in range(slots):
            slot = (start + i) % slots
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
    return os.getpid() % slots, None


class UidPool:
    """Hands out unprivileged uids, never one still in use (see the module doc)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._base: int | None = None
        self._pid = -1
        self._fd: int | None = None
        self._used: set[int] = set()
        self._next = itertools.count()
        self._size = BLOCK
        self._sub: SubRange | None = None

    def _block(self) -> int:
        if self._base is None or self._pid != os.getpid():  # first use, or a forked child
            if self._fd is not None and self._pid != os.getpid():
                with contextlib.suppress(OSError):
                    os.close(self._fd)  # the parent's lock is the parent's
            if os.geteuid() == 0:
                slot, self._fd = claim_slot()
                self._base, self._size, self._sub = BASE + slot * BLOCK, BLOCK, None
            else:
                self._sub, self._fd = _claim_subordinate()
                self._base = INNER_BASE
                self._size = self._sub.count if self._sub else USERNS_BLOCK
            self._pid = os.getpid()
            self._used = set()
        return self._base

    def subrange(self) -> SubRange | None:
        """Unprivileged: the block of subordinate ids this process maps (None: none usable)."""
        with self._lock:
            self._block()
            return self._sub

    def take(self) -> int:
        """A uid not currently handed out."""
        with self._lock:
            base = self._block()
            for _ in range(self._size):
                uid = base + next(self._next) % self._size
                if uid not in self._used:
                    self._used.add(uid)
                    return uid
        raise RuntimeError("no free sandbox uid")

    def give(self, uid: int) -> None:
        """Return ``uid`` to the pool (only once none of its processes exists)."""
        with self._lock:
            self._used.discard(uid)


def _claim_subordinate() -> tuple[SubRange | None, int | None]:
    """Claim a block of the caller's subordinate uids and gids (and the fd locking it)."""
    uid = os.geteuid()
    subuid, subgid = subordinate("/etc/subuid", uid), subordinate("/etc/subgid", uid)
    if subuid is None or subgid is None:
        return None, None
    size = min(USERNS_BLOCK, subuid[1], subgid[1])
    slots = max(1, min(subuid[1], subgid[1]) // size)
    slot, fd = claim_slot(slots)
    return SubRange(subuid[0] + slot * size, subgid[0] + slot * size, size), fd


UIDS = UidPool()
