"""The host's side of a workspace session: frames to its guest agent, and the session reaper.

A backend starts the guest agent (``verifiers.sandbox.guest.wsagent``) somewhere isolated with
its stdin and stdout piped here and hands both ends, the spec and a ``kill`` callable to
``GuestSession``, which implements ``verifiers.sandbox.workspace.Workspace``. Calls are
serialised (one request in flight per session). A reply that does not come within the
command's wall time plus a grace, or a stream that ends, ends the session (``kill``) and the
call reports ``ended="session"``. ``REAPER`` (one daemon thread for every session of the
process) closes a session idle for ``idle_s`` or older than ``lifetime_s``; the guest enforces
both too, and exits when its pipe closes, so a host that dies takes its sessions with it.
"""

from __future__ import annotations

import contextlib
import os
import select
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from tasksieve.verifiers.sandbox.guest.wsframe import b64, frame_recv, frame_send, unb64
from tasksieve.verifiers.sandbox.workspace import (
    WORKSPACE_ROOT,
    CommandResult,
    WorkspaceError,
    WorkspaceSpec,
)

GRACE_S = 10.0  # how much longer than a command's wall time the host waits for its reply
HELLO_S = 30.0  # how long the guest may take to set the workspace up


def _read_reply(fd: int, wait_s: float) -> dict[str, Any] | None:
    """The next frame on ``fd`` within ``wait_s`` seconds, or None (time out, end, garbage)."""
    poller = select.poll()  # not select(): a host with many sessions has fds above 1023
    poller.register(fd, select.POLLIN)
    if not poller.poll(max(wait_s, 0.0) * 1000):
        return None
    try:
        return frame_recv(fd)
    except (OSError, ValueError):
        return None


def _release(kill: Callable[[], None], *fds: int) -> None:
    """Kill a session nobody closed and close its descriptors (``weakref.finalize``)."""
    with contextlib.suppress(Exception):
        kill()
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


class GuestSession:
    """A live workspace whose guest agent answers on ``reply_fd`` (see the module doc)."""

    def __init__(
        self,
        spec: WorkspaceSpec,
        request_fd: int,
        reply_fd: int,
        kill: Callable[[], None],
        describe: str = "",
        host_pid: int | None = None,
    ) -> None:
        """``request_fd``/``reply_fd`` become the session's (it closes them); ``host_pid`` is
        the process on this host whose descendants are the session's (for accounting)."""
        self.spec, self.limits = spec, spec.limits
        self._req, self._rep, self._kill = request_fd, reply_fd, kill
        self._lock = threading.Lock()
        self._closed = False
        self.ended_by: str | None = None
        self.started = self.last_used = time.monotonic()
        self.busy = False
        self._reset_pending = False
        self.describe, self.host_pid = describe, host_pid
        hello = _read_reply(reply_fd, HELLO_S)
        if hello is None or not hello.get("ok"):
            why = (hello or {}).get("error") or "the guest agent did not start"
            self.close("setup")
            raise WorkspaceError(f"cannot open a workspace over {spec.snapshot}: {why}")
        self.hello = hello
        # A session dropped without close(), or alive at exit, is still killed and released.
        self._finalizer = weakref.finalize(self, _release, kill, request_fd, reply_fd)
        REAPER.add(self)

    # ------------------------------------------------------------------ Workspace
    @property
    def root(self) -> str:
        return WORKSPACE_ROOT

    @property
    def alive(self) -> bool:
        return not self._closed

    def _call(self, req: dict[str, Any], wait_s: float) -> dict[str, Any] | None:
        with self._lock:
            if self._closed:
                return None
            self.busy, self.last_used = True, time.monotonic()
            if self._reset_pending:
                req, self._reset_pending = {**req, "reset": True}, False
            try:
                frame_send(self._req, req)
                reply = _read_reply(self._rep, wait_s)
            except OSError:
                reply = None
            finally:
                self.busy, self.last_used = False, time.monotonic()
        if reply is None:
            self.close("session")
        return reply

    def _command(self, req: dict[str, Any], timeout_s: float | None) -> CommandResult:
        wall = float(timeout_s or self.limits.command_wall_s)
        t0 = time.monotonic()
        reply = self._call({**req, "timeout": wall}, wall + GRACE_S)
        if reply is None or not reply.get("ok"):
            err = b"" if reply is None else str(reply.get("error", "")).encode()
            return CommandResult(None, b"", err, time.monotonic() - t0, ended="session")
        ended = reply.get("ended")
        return CommandResult(
            exit_code=reply.get("exit"),
            stdout=unb64(reply["out"]),
            stderr=unb64(reply["err"]),
            duration_s=float(reply.get("dur", time.monotonic() - t0)),
            ended=ended,
            truncated=ended == "output",
            cpu_s=None if reply.get("cpu") is None else float(reply["cpu"]),
        )

    def exec(self, command: str, timeout_s: float | None = None) -> CommandResult:
        """Run ``command`` in the session's persistent shell."""
        return self._command({"op": "exec", "cmd": command}, timeout_s)

    def run(
        self, argv: list[str], timeout_s: float | None = None, cwd: str = WORKSPACE_ROOT
    ) -> CommandResult:
        """Run ``argv`` as a fresh process, outside the shell."""
        if not argv:
            raise ValueError("run needs a non-empty argv")
        return self._command({"op": "run", "argv": list(argv), "cwd": cwd}, timeout_s)

    def _file_call(self, req: dict[str, Any]) -> dict[str, Any]:
        reply = self._call(req, GRACE_S + 20.0)
        if reply is None:
            raise WorkspaceError(f"the workspace session is gone ({self.ended_by})")
        if not reply.get("ok"):
            if reply.get("kind") == "path":
                raise ValueError(str(reply.get("error")))
            raise WorkspaceError(str(reply.get("error")))
        return reply

    def write_file(self, path: str, data: bytes) -> None:
        """Write ``data`` at ``path`` under the root; ValueError for a path leaving it."""
        self._file_call({"op": "write", "path": path, "data": b64(bytes(data))})

    def read_file(self, path: str, max_bytes: int = 1_000_000) -> bytes | None:
        """The file at ``path`` under the root (None: none); ValueError for a path leaving it."""
        data = self._file_call({"op": "read", "path": path, "max": int(max_bytes)})["data"]
        return None if data is None else unb64(data)

    def diff(self) -> str:
        """Every change against the snapshot: computed on the host, which alone holds the
        snapshot (``wshostdiff.SnapshotSession``, what the backends return)."""
        raise NotImplementedError("the diff is computed on the host: use SnapshotSession")

    def close(self, reason: str = "closed") -> None:
        """Kill every process of the session and remove its layer; safe to call twice."""
        if self._closed:
            return
        self._closed, self.ended_by = True, reason
        REAPER.discard(self)
        self._kill()  # first: a call in flight then sees the stream end and lets go
        with self._lock:
            finalizer = getattr(self, "_finalizer", None)
            if finalizer is not None:
                finalizer.detach()
            for fd in (self._req, self._rep):
                with contextlib.suppress(OSError):
                    os.close(fd)

    def ping(self) -> bool:
        """One round trip (it counts as use: the guest's idle clock starts again)."""
        return self._call({"op": "ping"}, GRACE_S) is not None

    def hand_out(self) -> bool:
        """Restart the session's idle and lifetime clocks for a new owner (a pooled session),
        without a round trip: the guest restarts its own with the next request. False (and
        nothing changed) when the session is gone or used more than ``idle_s / 2`` ago."""
        now = time.monotonic()
        if self._closed or now - self.last_used > self.limits.idle_s / 2:
            return False
        self.started = self.last_used = now
        self._reset_pending = True
        return True

    def expired(self, now: float) -> str | None:
        """``idle`` or ``lifetime`` when the session has outlived that limit, else None."""
        if now - self.started >= self.limits.lifetime_s + (GRACE_S if self.busy else 0.0):
            return "lifetime"
        if not self.busy and now - self.last_used >= self.limits.idle_s:
            return "idle"
        return None

    def __enter__(self) -> GuestSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Reaper:
    """One daemon thread closing expired sessions (``GuestSession.expired``)."""

    def __init__(self, period_s: float = 0.5) -> None:
        self.period_s = period_s
        self._sessions: weakref.WeakSet[GuestSession] = weakref.WeakSet()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def add(self, session: GuestSession) -> None:
        """Watch ``session`` from now on."""
        with self._lock:
            self._sessions.add(session)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, daemon=True, name="ws-reaper")
                self._thread.start()

    def discard(self, session: GuestSession) -> None:
        """Stop watching ``session``."""
        with self._lock:
            self._sessions.discard(session)

    def _loop(self) -> None:
        while True:
            time.sleep(self.period_s)
            now = time.monotonic()
            with self._lock:
                due = [(s, why) for s in list(self._sessions) if (why := s.expired(now))]
            for session, why in due:
                with contextlib.suppress(Exception):  # one bad session must not stop the rest
                    session.close(why)


REAPER = Reaper()
