"""System V IPC and POSIX message queues of a run's IPC namespace: bounded, and cleaned up.

A SysV shared memory segment, semaphore set or message queue outlives the process that made
it (until it is removed or its IPC namespace ends), and none of them counts against a
process's ``RLIMIT_AS``: with a new namespace's defaults (``shmall`` of 2^64 bytes, 32,000
sets of 32,000 semaphores) one run could hold as much memory as the machine has, beyond its
memory limit, for as long as its namespace lives. ``limit_ipc`` sets the namespace's own
limits (they are per IPC namespace, written through a ``/proc`` mounted in it by its root):

- shared memory: at most ``budget`` bytes in all (the run's memory limit), 64 segments;
- semaphores: 64 sets of at most 250, 8,000 in all; message queues: 8 of 2 KB (and of at
  most 2,048 messages: about 1 MB of kernel memory in all);
- POSIX message queues: none (``fs.mqueue.queues_max`` 0), since their names cannot be
  listed here to remove one sample's queues before the next sample starts.

A limit the kernel does not have (built without SysV IPC or POSIX message queues) is skipped.
Where the kernel refuses to set them (``PermissionError``, a read-only ``/proc/sys``),
``limit_ipc`` returns False and the caller runs the jobs under the filter that refuses
creating SysV objects and message queues (``seccomp.build_filter(deny_ipc=True)``), as the
per-run bubblewrap path always does; any other failure fails the run's setup, naming the
limit.

``remove_ipc`` removes every SysV object a uid created or owns, once that uid's processes are
dead (the multi-sample entry calls it after each sample, so the next sample finds none of its
objects and gets the whole budget back). Standard library only; inlined by ``bundle``.
"""

from __future__ import annotations

import errno
import os

from tasksieve.verifiers.sandbox.process.guest.nsutil import _libc

_IPC_RMID = 0
PAGE = os.sysconf("SC_PAGE_SIZE")
# /proc/sysvipc/<kind>: column of the id, of the owner's uid and of the creator's uid
_COLUMNS = {"shm": (1, 7, 9), "sem": (1, 4, 6), "msg": (1, 7, 9)}


def _put(path: str, value: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


def limit_ipc(budget: int, proc: str = "/proc") -> bool:
    """Bound the calling process's IPC namespace (its root, with ``proc`` a ``/proc`` mounted
    in its namespaces); False where the kernel refuses (before Linux 5.19 only the initial
    user namespace's root may set these): the caller then refuses SysV IPC instead."""
    budget = int(budget) if budget > 0 else 512 << 20  # no address-space limit given
    for name, value in (
        ("kernel/shmmax", str(budget)),
        ("kernel/shmall", str(budget // PAGE)),
        ("kernel/shmmni", "64"),
        ("kernel/sem", "250 8000 32 64"),
        ("kernel/msgmni", "8"),
        ("kernel/msgmnb", "2048"),  # also the most messages a queue holds, empty ones too
        ("fs/mqueue/queues_max", "0"),
    ):
        try:
            _put(f"{proc}/sys/{name}", value)
        except FileNotFoundError:
            continue  # a kernel without that kind of IPC: nothing to bound
        except OSError as e:
            if isinstance(e, PermissionError) or e.errno == errno.EROFS:
                return False
            raise OSError(e.errno, f"limiting IPC ({name}): {e.strerror}") from None
    return True


def remove_ipc(uid: int) -> int:
    """Remove every SysV segment, semaphore set and queue ``uid`` created or owns; count them."""
    removed = 0
    for kind, (col_id, col_uid, col_cuid) in _COLUMNS.items():
        try:
            with open(f"/proc/sysvipc/{kind}", "rb") as fh:
                rows = fh.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            if len(cols) <= col_cuid or uid not in (int(cols[col_uid]), int(cols[col_cuid])):
                continue
            ident = int(cols[col_id])
            if kind == "shm":
                rc = _libc.shmctl(ident, _IPC_RMID, None)
            elif kind == "sem":
                rc = _libc.semctl(ident, 0, _IPC_RMID)
            else:
                rc = _libc.msgctl(ident, _IPC_RMID, None)
            removed += rc == 0
    return removed
