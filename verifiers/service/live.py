"""Live sessions: each service session is a workspace with a persistent shell.

Where the sandbox opens workspaces (``Capabilities.workspaces``), a session is one
``Workspace`` (``verifiers.sandbox.workspace``) over an empty, read-only snapshot: a private
copy-on-write layer of ``session_max_bytes`` (rounded up to whole MiB) and one long-lived
``bash``. So, unlike the packed sessions (``sessions``), what persists between execs is the
whole session: files, the working directory, exported variables and background processes. A
``code`` snippet in bash runs in that shell itself (``cd`` and ``export`` stick); an argv
``command`` or a Python snippet runs as a child of it, from its current directory. Files are
written and read through the workspace's agent (paths checked there: no ``..``, no absolute
path, no symlink on the way).

Limits, per session: ``memory_mb`` (address space of each process, and the whole session
where a cgroup is writable), ``cpu_s`` (CPU seconds of each process), ``max_processes`` (all
its processes together), the disk quota of its layer, an idle ``ttl_s`` and a hard
``lifetime_s``; per exec: ``timeout_s`` (the shell is restarted after one that runs out,
background jobs kept). Deleting a session, or its expiry, kills every process in it and drops
its layer (``Workspace.close``).

Differences from the packed sessions a client may notice: the quota is the layer's size, so a
write past it fails in the sandbox (``No space left on device``) instead of the file being
dropped afterwards (``dropped`` is always empty); stdin is given to the command through a
file, and processes started by one exec are still running at the next.
"""

from __future__ import annotations

import math
import secrets
import shlex
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from tasksieve.verifiers.sandbox.base import Execution, Limits, Sandbox
from tasksieve.verifiers.sandbox.workspace import (
    WORKSPACE_ROOT,
    SessionLimits,
    Workspace,
    WorkspaceError,
    WorkspaceSpec,
)
from tasksieve.verifiers.service.guest.session_exec import RESERVED
from tasksieve.verifiers.service.registry import SessionError, SessionRegistry
from tasksieve.verifiers.service.sessions import Command, ExecResult

STDIN_NAME = ".tasksieve_stdin"
HIDDEN = (*RESERVED, STDIN_NAME)
LIMIT_OF = {"cpu": "cpu", "memory": "memory", "processes": "processes", "disk": "file_size"}
LIST_FILES = ["find", ".", "-xdev", "-type", "f", "-printf", "%s %P\\0"]


@dataclass
class LiveSession:
    """One live session: its workspace, limits and clocks (see the module docstring)."""

    id: str
    ws: Workspace
    limits: Limits
    ttl_s: float
    lifetime_s: float
    created: float = field(default_factory=time.time)
    started: float = field(default_factory=time.monotonic)
    last_used: float = field(default_factory=time.monotonic)
    lock: threading.Lock = field(default_factory=threading.Lock)
    in_use: int = 0
    closed: bool = False

    @property
    def expires_in(self) -> float:
        """Seconds until the session ends: idle TTL (not while in use) or lifetime."""
        left = self.lifetime_s - (time.monotonic() - self.started)
        if not self.ws.alive:
            return 0.0
        if self.in_use:
            return left
        return min(left, self.ttl_s - (time.monotonic() - self.last_used))


class LiveSessionStore(SessionRegistry[LiveSession]):
    """Creates, finds, runs and reaps live sessions over one sandbox's workspaces."""

    live = True

    def __init__(
        self, sandbox: Sandbox, max_sessions: int, max_bytes: int, lifetime_s: float
    ) -> None:
        super().__init__()
        self.sandbox, self.max_sessions, self.max_bytes = sandbox, max_sessions, max_bytes
        self.lifetime_s = lifetime_s
        self._empty = tempfile.TemporaryDirectory(prefix="tasksieve-live-")
        Path(self._empty.name).chmod(0o555)
        self._pending = 0

    def _spec(self, limits: Limits, ttl_s: float, lifetime_s: float) -> WorkspaceSpec:
        return WorkspaceSpec(
            snapshot=self._empty.name,
            limits=SessionLimits(
                idle_s=ttl_s + 5.0,  # the store reaps first; the workspace's own clock backs it
                lifetime_s=lifetime_s + 5.0,
                command_wall_s=3600.0,
                cpu_s=limits.cpu_s,
                memory_mb=limits.memory_mb,
                max_processes=limits.max_processes + 1,  # the shell itself
                disk_mb=max(1, math.ceil(self.max_bytes / (1 << 20))),
                max_output_bytes=limits.max_output_bytes,
            ),
        )

    def create(self, limits: Limits, ttl_s: float, lifetime_s: float | None = None) -> LiveSession:
        """Open a session's workspace (429 past ``max_sessions``, 503 when it cannot open)."""
        life = min(lifetime_s or self.lifetime_s, self.lifetime_s)
        with self._lock:
            if len(self._sessions) + self._pending >= self.max_sessions:
                raise SessionError(f"too many sessions (max {self.max_sessions})", 429)
            self._pending += 1
        try:
            ws = self.sandbox.open_workspace(self._spec(limits, ttl_s, life))
        except WorkspaceError as exc:
            raise SessionError(f"the session's workspace did not open: {exc}", 503) from exc
        finally:
            with self._lock:
                self._pending -= 1
        session = LiveSession(secrets.token_urlsafe(18), ws, limits, ttl_s, life)
        with self._lock:
            self._sessions[session.id] = session
        return session

    def delete(self, sid: str) -> bool:
        """End ``sid``: every process in it is killed and its layer dropped."""
        with self._lock:
            session = self._sessions.pop(sid, None)
        if session is None:
            return False
        session.closed = True
        session.ws.close()  # kills a command in flight too; its exec answers "session"
        return True

    def close(self) -> None:
        for sid in list(self._sessions):
            self.delete(sid)
        self._empty.cleanup()

    # ------------------------------------------------------------------ files
    def list_files(self, session: LiveSession) -> dict[str, int]:
        """Every regular file of the session (name -> bytes), the service's own left out."""
        res = session.ws.run(LIST_FILES, timeout_s=30, cwd=WORKSPACE_ROOT)
        if res.exit_code != 0:
            why = res.ended or res.stderr.decode("utf-8", "replace")[-300:]
            raise SessionError(f"cannot list the files of session {session.id}: {why}", 503)
        files: dict[str, int] = {}
        for entry in res.stdout.decode("utf-8", "surrogateescape").split("\0"):
            size, _, name = entry.partition(" ")
            if name and name not in HIDDEN and size.isdigit():
                files[name] = int(size)
        return dict(sorted(files.items()))

    def room_for(self, session: LiveSession, name: str) -> int:
        """Bytes a PUT of ``name`` may hold now (the file it replaces does not count)."""
        _check(name)
        files = self.list_files(session)
        return self.max_bytes - sum(files.values()) + files.get(name, 0)

    def put_file(self, session: LiveSession, name: str, data: bytes) -> None:
        _check(name)
        with session.lock:
            if session.closed or not session.ws.alive:
                raise SessionError(f"session {session.id} has ended", 404)
            try:
                session.ws.write_file(name, data)
            except ValueError as exc:
                raise SessionError(str(exc)) from exc
            except WorkspaceError as exc:
                raise SessionError(f"cannot write {name!r}: {exc}", 409) from exc

    def get_file(self, session: LiveSession, name: str) -> bytes:
        _check(name)
        if not session.ws.alive:
            raise SessionError(f"session {session.id} has ended", 404)
        try:
            data = session.ws.read_file(name, max_bytes=self.max_bytes)
        except ValueError as exc:
            raise SessionError(str(exc)) from exc
        except WorkspaceError as exc:
            raise SessionError(f"cannot read {name!r}: {exc}", 404) from exc
        if data is None:
            raise SessionError(f"no file {name!r} in session {session.id}", 404)
        return data

    # ------------------------------------------------------------------ exec
    def exec(
        self, session: LiveSession, command: Command, stdin: bytes, timeout_s: float
    ) -> ExecResult:
        """Run ``command`` in the session's shell; with ``command.files`` the files after it."""
        with session.lock:
            if session.closed:
                raise SessionError(f"session {session.id} was deleted", 404)
            line = command.shell if command.shell is not None else shlex.join(command.argv)
            if stdin:
                try:
                    session.ws.write_file(STDIN_NAME, stdin)
                except (WorkspaceError, ValueError) as exc:
                    why = f"cannot hand stdin to session {session.id}: {exc}"
                    raise SessionError(why, 409) from exc
                where = shlex.quote(f"{WORKSPACE_ROOT}/{STDIN_NAME}")
                line = f"{{ rm -f {where}; {line}\n}} < {where}"
            res = session.ws.exec(line, timeout_s=timeout_s)
            timed_out = res.ended == "wall"
            gone = res.ended == "session"
            limit = "output" if res.truncated else LIMIT_OF.get(res.ended or "")
            ex = Execution(
                exit_code=None if timed_out or gone else res.exit_code,
                stdout=res.stdout,
                stderr=res.stderr,
                duration_s=res.duration_s,
                cpu_s=res.cpu_s,
                limit_hit="wall" if timed_out else ("session" if gone else limit),
                stdout_truncated=res.truncated,
            )
        if gone:
            self.delete(session.id)
            return ExecResult(ex, None, False, [], [], False)
        files = sorted(self.list_files(session)) if command.files else []
        return ExecResult(ex, ex.exit_code, timed_out, files, [], True)


def _check(name: str) -> None:
    """400 for a name the service keeps for itself (the workspace checks the rest)."""
    if "\x00" in name:
        raise SessionError(f"a file name may not hold a NUL byte, got {name[:80]!r}")
    if name in HIDDEN:
        raise SessionError(f"{name!r} is reserved by the service")
