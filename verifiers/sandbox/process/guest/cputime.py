"""CPU time of a run's processes as the fork server and a multi-sample init see it.

Inlined into the fork server (``forkserver``) by ``bundle``; standard library only.

``wait4`` gives a reaped process's user plus system time together with that of every child it
reaped, so a run whose processes all end before their init does is measured whole by reaping
the init. A killed run is not: when a pid namespace's init exits, the kernel kills the other
members and discards them without adding their time anywhere. So before the server kills a
run it reads the live descendants of the run's init from ``/proc`` (``live_cpu``): each one's
own time and that of the children it reaped (``stat`` fields 14 to 17, in clock ticks). A
process that exits in the moment between that reading and the kill is counted with the
reading and, where its parent reaps it first, once more in the parent's time.
"""

from __future__ import annotations

import os
import time

_TICK = os.sysconf("SC_CLK_TCK")
_WALK_S = 0.02  # at most this long, and at most _WALK_PIDS processes, per reading
_WALK_PIDS = 512


def stat_cpu(pid: int) -> float | None:
    """User plus system seconds of ``pid`` and of the children it reaped, or None if gone.

    Its own time is the larger of ``stat``'s (clock ticks, whole process, exited threads
    included) and the sum of its live threads' ``schedstat`` run time (nanoseconds): a
    verification's processes often run for less than a tick, which ``stat`` alone rounds
    down to nothing. Reaped children's time exists in ticks only.
    """
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    try:  # after the command name: state is field 3, utime..cstime fields 14..17
        own = (int(fields[11]) + int(fields[12])) / _TICK
        reaped = (int(fields[13]) + int(fields[14])) / _TICK
    except (ValueError, IndexError):
        return None
    return max(own, _run_time(pid)) + reaped


def _run_time(pid: int) -> float:
    """Seconds the live threads of ``pid`` ran (``schedstat``'s first field), 0 if unread."""
    total = 0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0.0
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as fh:
                total += int(fh.read().split()[0])
        except (OSError, ValueError, IndexError):
            continue
    return total / 1e9


def _children(pid: int) -> list[int]:
    kids: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return kids
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as fh:
                kids += [int(k) for k in fh.read().split()]
        except (OSError, ValueError):
            continue
    return kids


def live_cpu(init: int) -> float | None:
    """CPU seconds of every live descendant of ``init`` (not ``init`` itself), read now; None
    when the tree is too big or changes too fast to read (a fork bomb) within ``_WALK_S`` and
    ``_WALK_PIDS``: the kill must not wait, and a partial reading would undercount."""
    total, todo, seen = 0.0, _children(init), {init}
    end = time.monotonic() + _WALK_S
    while todo:
        if len(seen) > _WALK_PIDS or time.monotonic() > end:
            return None
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        total += stat_cpu(pid) or 0.0
        todo += _children(pid)
    return total
