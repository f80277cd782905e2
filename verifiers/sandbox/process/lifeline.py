"""The host's lifeline: a pipe whose write end only this process holds, so EOF means it died.

A cold run (bubblewrap or ``unshare``, a fresh process tree per run) is tied to its host by
parent-death signals, but each link of that chain sets its signal after its own fork: a host
killed in that moment leaves the run going, reparented, with nothing left to end it. Each cold
run therefore also gets a descriptor of the lifeline's read end and checks it once every link
is armed:

- the ``unshare`` path's guest (pid 1 of the run) watches it for the whole run and exits at
  EOF, taking its namespace with it (``guest/mountns.py``);
- a bubblewrap run starts with ``guard_prefix``: a shell that reads the lifeline without
  blocking (``dd iflag=nonblock``) before it execs the rest. bubblewrap arms both of its
  parent-death signals before it runs the command, so a host that died before the check is
  seen there (EOF: the run exits 137 without running anything), and one that dies after it
  takes the run down through the armed signals.

The write end is close-on-exec and a forked child drops both ends (``os.register_at_fork``),
so no other process keeps a dead host's lifeline open. It does NOT cover a system without
``sh`` and ``dd`` on the sandbox's PATH (bubblewrap runs then start unguarded, as before).
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import threading

from tasksieve.verifiers.sandbox.process.runs import PATH

_PIPE: list[int] = []  # [read end, write end], once made
_LOCK = threading.Lock()
# $1: the lifeline's fd. EOF (or, never sent, a byte) ends the run before it starts; a live,
# empty pipe makes dd fail (EAGAIN), so the run goes on. The descriptor stays open in the run
# (dash cannot close a descriptor above 9 by number): a read end tells it only whether the
# host is alive, and no write end is ever in a run, so it cannot delay the EOF.
GUARD = (
    'dd if=/proc/self/fd/"$1" of=/dev/null bs=1 count=1 iflag=nonblock 2>/dev/null && exit 137; '
    'shift; exec "$@"'
)


def lifeline() -> int:
    """A new descriptor of the lifeline's read end (the caller passes it to one run, then
    closes it)."""
    with _LOCK:
        if not _PIPE:
            _PIPE.extend(os.pipe2(os.O_CLOEXEC))
        return os.dup(_PIPE[0])


def _drop() -> None:
    """In a forked child: the parent's lifeline is not this process's."""
    for fd in _PIPE:
        with contextlib.suppress(OSError):
            os.close(fd)
    _PIPE.clear()


os.register_at_fork(after_in_child=_drop)


@functools.cache
def _guard_shell() -> str | None:
    """``sh``'s path where both it and ``dd`` are on the sandbox's PATH (looked up once)."""
    sh, dd = shutil.which("sh", path=PATH), shutil.which("dd", path=PATH)
    return sh if dd is not None else None


def guard_prefix(keep: list[int]) -> list[str]:
    """The argv prefix that checks the lifeline inside a bubblewrap run, then execs the rest;
    its descriptor is appended to ``keep``. Empty where ``sh`` or ``dd`` is missing."""
    sh = _guard_shell()
    if sh is None:
        return []
    fd = lifeline()
    keep.append(fd)
    return [sh, "-c", GUARD, "sh", str(fd)]
