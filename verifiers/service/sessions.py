"""Stateful sessions for multi-step agents: files persist between execs, processes do not.

A session is a private host directory of files plus its limits. Each exec is one ordinary
sandbox run: the session's files go in (through the ``session_exec`` guest, which unpacks
them as the run's own), the command runs, and every regular file left in the scratch
directory comes back and replaces the session's files. So what persists between execs is
the file tree (up to ``max_bytes``); what does not is any process, environment variable,
working-directory change or open socket: each exec starts from a fresh sandbox. An exec
stopped by a sandbox limit (wall, memory...) before the files were packed leaves the
session's files as they were before it. Execs on one session run one at a time.

Isolation between sessions is the sandbox's (each run sees only the files sent in) plus
unguessable ids; every client holding the service token may reach any session whose id it
knows. Not guarded against: a session id leaked to another client.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from tasksieve.verifiers.sandbox.base import Execution, Limits, Sandbox
from tasksieve.verifiers.sandbox.guest import bundle
from tasksieve.verifiers.sandbox.support import check_name
from tasksieve.verifiers.service.guest import session_exec as guest

GUEST_SOURCE = bundle(guest.__file__)


class SessionError(Exception):
    """A request about a session that cannot be honoured (unknown id, bad name, too big)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class Session:
    """One session: its directory, limits, and when it expires if left idle."""

    id: str
    root: Path
    limits: Limits
    ttl_s: float
    created: float = field(default_factory=time.time)
    last_used: float = field(default_factory=time.monotonic)
    lock: threading.Lock = field(default_factory=threading.Lock)
    closed: bool = False

    @property
    def expires_in(self) -> float:
        return self.ttl_s - (time.monotonic() - self.last_used)


@dataclass(frozen=True)
class ExecResult:
    """What one exec did, and the files it left (names only; the bytes stay in the session)."""

    execution: Execution
    exit_code: int | None
    timed_out: bool
    files: list[str]
    dropped: list[str]
    files_kept: bool  # False when the run died before packing its files (limit hit)


class SessionStore:
    """Creates, finds, runs and reaps sessions over one sandbox."""

    def __init__(self, sandbox: Sandbox, max_sessions: int, max_bytes: int) -> None:
        self.sandbox = sandbox
        self.max_sessions = max_sessions
        self.max_bytes = max_bytes
        self._base = Path(tempfile.mkdtemp(prefix="tasksieve-sessions-"))
        os.chmod(self._base, 0o700)
        self._sessions: dict[str, Session] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._sessions)

    def create(self, limits: Limits, ttl_s: float) -> Session:
        with self._lock:
            if len(self._sessions) >= self.max_sessions:
                raise SessionError(f"too many sessions (max {self.max_sessions})", 429)
            sid = secrets.token_urlsafe(18)
            root = self._base / sid
            root.mkdir(mode=0o700)
            session = Session(sid, root, limits, ttl_s)
            self._sessions[sid] = session
            return session

    def get(self, sid: str) -> Session:
        with self._lock:
            session = self._sessions.get(sid)
        if session is None or session.closed or session.expires_in <= 0:
            raise SessionError(f"no session {sid!r} (never created, deleted or expired)", 404)
        session.last_used = time.monotonic()
        return session

    def delete(self, sid: str) -> bool:
        with self._lock:
            session = self._sessions.pop(sid, None)
        if session is None:
            return False
        with session.lock:  # an exec in progress finishes first
            session.closed = True
            shutil.rmtree(session.root, ignore_errors=True)
        return True

    def reap(self) -> list[str]:
        """Delete every expired session; returns their ids."""
        with self._lock:
            expired = [s.id for s in self._sessions.values() if s.expires_in <= 0]
        return [sid for sid in expired if self.delete(sid)]

    def close(self) -> None:
        for sid in list(self._sessions):
            self.delete(sid)
        shutil.rmtree(self._base, ignore_errors=True)

    # ------------------------------------------------------------------ files
    def put_file(self, session: Session, name: str, data: bytes) -> None:
        path = self._path(session, name)
        with session.lock:
            if self._size(session) + len(data) > self.max_bytes:
                raise SessionError(f"session files would exceed {self.max_bytes} bytes", 413)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)

    def get_file(self, session: Session, name: str) -> bytes:
        path = self._path(session, name)
        if path.is_symlink() or not path.is_file():
            raise SessionError(f"no file {name!r} in session {session.id}", 404)
        return path.read_bytes()

    def list_files(self, session: Session) -> dict[str, int]:
        return {
            str(p.relative_to(session.root)): p.stat().st_size
            for p in sorted(session.root.rglob("*"))
            if p.is_file() and not p.is_symlink()
        }

    # ------------------------------------------------------------------ exec
    def exec(self, session: Session, argv: list[str], stdin: bytes, timeout_s: float) -> ExecResult:
        """Run ``argv`` over the session's files; keep the files it leaves."""
        with session.lock:
            if session.closed:
                raise SessionError(f"session {session.id} was deleted", 404)
            files = {
                name: base64.b64encode((session.root / name).read_bytes()).decode("ascii")
                for name in self.list_files(session)
            }
            request = {
                "files": files,
                "argv": argv,
                "timeout_s": timeout_s,
                "max_bytes": self.max_bytes,
            }
            lim = session.limits
            limits = Limits(
                wall_s=timeout_s + 5.0,
                cpu_s=lim.cpu_s + 2.0,  # the session's CPU budget per exec, plus packing
                memory_mb=lim.memory_mb,
                max_processes=lim.max_processes,
                max_output_bytes=lim.max_output_bytes,
                max_file_bytes=3 * self.max_bytes + 1_000_000,
                scratch_mb=max(lim.scratch_mb, 4 * self.max_bytes // 1_000_000 + 16),
            )
            ex = self.sandbox.run(
                {guest.IN_NAME: json.dumps(request), guest.SELF_NAME: GUEST_SOURCE},
                [self.sandbox.python, "-I", "-S", guest.SELF_NAME],
                limits,
                stdin=stdin,
                collect=(guest.OUT_NAME,),
            )
            out = ex.files.get(guest.OUT_NAME)
            if out is None:  # killed by a limit before packing, or the step itself broke
                if ex.limit_hit is None and ex.infra_error is None:
                    why = ex.stderr.decode("utf-8", "replace")[-500:]
                    ex = replace(ex, infra_error=f"session step reported nothing: {why}")
                return ExecResult(ex, ex.exit_code, ex.limit_hit == "wall", [], [], False)
            state = json.loads(out)
            self._replace(session, state["files"])
            return ExecResult(
                ex,
                state["exit"],
                bool(state["timed_out"]),
                sorted(state["files"]),
                list(state["dropped"]),
                True,
            )

    def _replace(self, session: Session, files: dict[str, str]) -> None:
        """Make the session's directory hold exactly ``files`` (names checked first)."""
        decoded: dict[str, bytes] = {}
        for name, data in files.items():
            check_name(name)
            decoded[name] = base64.b64decode(data)
        staging = Path(tempfile.mkdtemp(dir=self._base, prefix=".staging-"))
        for name, content in decoded.items():
            path = staging / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content)
        old = session.root.with_name(session.root.name + ".old")
        session.root.rename(old)
        staging.rename(session.root)
        shutil.rmtree(old, ignore_errors=True)

    def _path(self, session: Session, name: str) -> Path:
        try:
            check_name(name)
        except ValueError as exc:
            raise SessionError(str(exc)) from exc
        if name in guest.RESERVED:
            raise SessionError(f"{name!r} is reserved by the service")
        return session.root / name

    def _size(self, session: Session) -> int:
        return sum(self.list_files(session).values())
