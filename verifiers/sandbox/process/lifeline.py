"""The host's lifeline: a pipe whose write end only this process holds, so EOF means it died.

A cold run (bubblewrap or ``unshare``, a fresh process tree per run) is tied to its host by
parent-death signals, but each link of that chain sets its signal after its own fork: a host
killed in that moment leaves the run going, reparented, with nothing left to end it. Each cold
run therefore also gets a descriptor of the lifeline's read end and checks it once every link
is armed:

- the ``unshare`` path's guest (pid 1 of the run) watches it for the whole run and exits at
  EOF, taking its namespace with it (``guest/mountns.py``);
- a bubblewrap run starts with ``guard_prefix``: a shell that reads the lifeline without
  blocking (``dd iflag=nonblock``) before it execs the rest, so a run whose host died before
  the check exits 137 without running anything;
- bubblewrap's own chain has gaps the run cannot close from inside (its namespace child
  sleeps on an eventfd before it arms anything, and its init arms its signal only after it
  forked the command), so the first lifeline also starts an undertaker
  (``guest/undertaker.py``): a small process in its own session that waits for EOF, then
  kills every process still holding a lifeline descriptor and every process of their pid
  namespaces.

The write end is close-on-exec and a forked child drops both ends and forgets the undertaker
(``os.register_at_fork``; its own first cold run makes its own), so no other process keeps a
dead host's lifeline open. It does NOT cover a system without ``sh`` and ``dd`` on the
sandbox's PATH (bubblewrap runs then start unguarded by the shell, the undertaker still
sweeping), nor a run whose processes all closed their lifeline descriptor inside one of the
gaps above on a host killed in that moment.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import shutil
import subprocess
import sys
import threading

from tasksieve.verifiers.sandbox.process.launchers import UNDERTAKER
from tasksieve.verifiers.sandbox.process.runs import PATH

log = logging.getLogger(__name__)
_PIPE: list[int] = []  # [read end, write end], once made
_UNDERTAKER: list[subprocess.Popen[bytes]] = []  # this process's, once started
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
            _start_undertaker(_PIPE[0])
        return os.dup(_PIPE[0])


def _start_undertaker(read: int) -> None:
    """Start the process that sweeps up this host's cold runs once the lifeline reads EOF."""
    try:
        _UNDERTAKER.append(
            subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", UNDERTAKER, str(read)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                pass_fds=(read,),
                start_new_session=True,
            )
        )
    except OSError as e:  # the runs keep their own guards; only the sweep is missing
        log.warning("no undertaker for this host's cold runs: %s", e)


def _drop() -> None:
    """In a forked child: the parent's lifeline (and its undertaker) are not this process's."""
    for fd in _PIPE:
        with contextlib.suppress(OSError):
            os.close(fd)
    _PIPE.clear()
    _UNDERTAKER.clear()


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
