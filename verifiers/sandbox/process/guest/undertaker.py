"""Host-side helper: end what is left of a dead host's cold runs.

Started once per host process, in its own session, by ``process.lifeline``:
``python -I -S -c <this source> FD`` where FD is a read end of the host's lifeline pipe (the
only write end is in the host). It blocks on FD; EOF means the host is gone, however it went.
It then kills every process that still holds a descriptor of that pipe (each cold run is
passed one) and, where such a process is in a pid namespace other than this one, every process
of that namespace, its init included: killing a namespace's init ends all of it. It scans again
until a scan finds nothing (at most ``DEADLINE`` seconds), then exits. Standard library only.

Why it is needed: bubblewrap's parent-death signals leave two gaps that nothing inside the run
can close. Its namespace child waits on an eventfd for its parent's go-ahead before it arms
anything, so a host killed after bubblewrap armed its own signal and before it wrote that
eventfd leaves the child asleep forever; and bubblewrap's init arms its signal after it forks
the command, so a host killed in that moment leaves the command running, reparented. Both
still hold the lifeline descriptor (the child every inherited one, the command the one it was
given). What it does NOT reclaim: a run whose processes all closed that descriptor before the
host died, inside one of those gaps.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time

DEADLINE = 10.0


def _link(path: str) -> str:
    with contextlib.suppress(OSError):
        return os.readlink(path)
    return ""


def _pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def _holds(pid: int, target: str) -> bool:
    """Whether ``pid`` has a descriptor on the pipe ``target`` (``pipe:[INODE]``)."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    return any(_link(f"/proc/{pid}/fd/{fd}") == target for fd in fds)


def sweep(target: str, me: int, own_ns: str) -> int:
    """Kill the holders of ``target`` and every process of their foreign pid namespaces."""
    pids = [p for p in _pids() if p != me]
    holders = [p for p in pids if _holds(p, target)]
    spaces = {_link(f"/proc/{p}/ns/pid") for p in holders} - {own_ns, ""}
    doomed = set(holders) | {p for p in pids if _link(f"/proc/{p}/ns/pid") in spaces}
    for pid in doomed:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    return len(doomed)


def main() -> None:
    """Wait for the host's end, then sweep until nothing is left."""
    fd = int(sys.argv[1])
    target = _link(f"/proc/self/fd/{fd}")
    own_ns = _link("/proc/self/ns/pid")
    try:
        while os.read(fd, 4096):
            pass
    except OSError:
        pass
    end = time.monotonic() + DEADLINE
    while sweep(target, os.getpid(), own_ns) and time.monotonic() < end:
        time.sleep(0.02)  # killed processes take a moment to drop their descriptors


if __name__ == "__main__":
    main()
