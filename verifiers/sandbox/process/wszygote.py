"""The workspace zygote of one ``process`` sandbox: sessions forked from a pre-imported guest.

A cold session (``workspace.open_process_workspace``) starts bubblewrap or ``unshare`` and a
fresh interpreter, which imports the guest: most of its time. ``WorkspaceZygote`` starts
``guest/wszygote.py`` once (lazily, at the first open; again after it died or the host forked),
as root on the host with the whole guest imported, and asks it for one session per open: the
zygote forks pid 1 of a fresh pid namespace, which enters fresh mount, network, ipc and uts
namespaces and runs the cold ``unshare`` path's set-up (see the guest module's doc). The
session's pipes and config go to the zygote over a unix socket (SCM_RIGHTS); a pidfd of the
session's pid 1 comes back, so the host kills the session and waits for its namespace to
empty without a pid that could be reused. The ``GuestSession`` on the host is the same.

It needs root (the zygote creates the namespaces and mounts itself, and sessions run as
per-session uids); unprivileged, or where the zygote does not start, sessions open cold.

Lifetime: the zygote has a parent-death signal (it is started from a ``reap.Keeper`` thread)
and exits, killing every session, at EOF on its control socket; each session's pid 1 has a
parent-death signal on the zygote. ``close`` returns once the zygote has exited; the sessions
it still had are SIGKILLed by it and die with their pid 1 (the sandbox closes and waits for
its open sessions before it closes the zygote).
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

from tasksieve.verifiers.sandbox.guest import bundle
from tasksieve.verifiers.sandbox.process.reap import Keeper, wait_gone
from tasksieve.verifiers.sandbox.process.runs import PATH

ZYGOTE_SOURCE = bundle(str(Path(__file__).parent / "guest" / "wszygote.py"))
_START_S = 30.0
_RETRY_S = 10.0  # after a failed start, opens go cold this long before the next try


class ZygoteError(OSError):
    """The zygote could not start or could not fork a session."""


class WorkspaceZygote:
    """One lazily started zygote for one interpreter (see module doc)."""

    def __init__(self, python: str) -> None:
        self.python = python
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._ctl: socket.socket | None = None
        self._owner = 0
        self._keeper = Keeper()
        self.starts = 0  # how many times a zygote was started (tests, monitoring)
        self.tries = 0  # how many times one was tried
        self.error: str | None = None  # why the last session could not be forked
        self._failed_at = -_RETRY_S  # monotonic time of the last failed start
        self._why = ""  # and why it failed

    @property
    def pid(self) -> int | None:
        """The zygote's host pid while it runs."""
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def _start(self) -> None:
        self._stop()
        if time.monotonic() - self._failed_at < _RETRY_S:
            raise ZygoteError(self._why)
        try:
            self._spawn()
        except ZygoteError as e:
            self._failed_at, self._why = time.monotonic(), str(e)
            raise

    def _spawn(self) -> None:
        self.tries += 1
        ctl, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        argv = [self.python, "-I", "-S", "-c", ZYGOTE_SOURCE, "zygote", str(theirs.fileno())]
        argv.append(str(os.getpid()))
        try:
            self._proc = self._keeper.popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                pass_fds=(theirs.fileno(),),
                start_new_session=True,
                cwd="/",
                env={"PATH": PATH, "LANG": "C.UTF-8"},
            )
        except OSError as e:
            ctl.close()
            raise ZygoteError(f"workspace zygote did not start: {e}") from e
        finally:
            theirs.close()
        self._ctl, self._owner = ctl, os.getpid()
        ready, _, _ = select.select([ctl], [], [], _START_S)
        hello = ctl.recv(16) if ready else b""
        if hello != b"ready":
            err = b""
            if self._proc.poll() is not None and self._proc.stderr is not None:
                err = self._proc.stderr.read()[-500:]
            self._stop()
            why = err.decode(errors="replace").strip() or "no ready within 30 s"
            raise ZygoteError(f"workspace zygote did not start: {why}")
        assert self._proc.stderr is not None
        self._proc.stderr.close()
        self.starts += 1

    def _stop(self) -> None:
        """Close the control socket (the zygote kills its sessions and exits) and wait."""
        if self._ctl is not None:
            self._ctl.close()
            self._ctl = None
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if self._owner == os.getpid():
            try:
                proc.wait(timeout=5.0)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc.stderr is not None and not proc.stderr.closed:
            proc.stderr.close()

    def _dead(self) -> bool:
        return self._proc is None or self._proc.poll() is not None

    def fork_session(self, cfg_fd: int, req_r: int, rep_w: int) -> tuple[int, int]:
        """Have the zygote fork one session with these fds; (pidfd, host pid) of its pid 1.

        Starts the zygote when none runs (or it died, or this process is a fork of the one
        that started it), and retries once on a zygote that went away meanwhile."""
        with self._lock:
            for attempt in (0, 1):
                if self._ctl is None or self._owner != os.getpid() or self._dead():
                    self._start()
                assert self._ctl is not None
                try:
                    socket.send_fds(self._ctl, [b"o"], [cfg_fd, req_r, rep_w])
                    ready, _, _ = select.select([self._ctl], [], [], _START_S)
                    if not ready:
                        raise ZygoteError("workspace zygote did not answer within 30 s")
                    msg, fds, _flags, _addr = socket.recv_fds(self._ctl, 256, 1)
                except OSError:
                    self._stop()
                    if attempt:
                        raise
                    continue
                if msg.startswith(b"ok ") and len(fds) == 1:
                    self.error = None
                    return fds[0], int(msg[3:])
                for fd in fds:
                    os.close(fd)
                if not msg:  # EOF: it died between the check and the request
                    self._stop()
                    if attempt:
                        raise ZygoteError("workspace zygote went away")
                    continue
                raise ZygoteError(f"workspace zygote: {msg.decode(errors='replace')}")
        raise ZygoteError("workspace zygote went away")  # pragma: no cover (loop returns)

    def close(self) -> None:
        """Stop the zygote; every session it forked is killed with it."""
        with self._lock:
            self._stop()
            self._keeper.stop()


def kill_session(pidfd: int, timeout: float = 30.0) -> bool:
    """SIGKILL a zygote session's pid 1 (and so its whole pid namespace) and wait until it is
    gone; closes ``pidfd``. True if it went within ``timeout``."""
    with contextlib.suppress(OSError):
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    return wait_gone([pidfd], timeout)
