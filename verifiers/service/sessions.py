"""Packed sessions, the fallback where the sandbox opens no workspaces: files persist between
execs, processes do not.

Where the sandbox opens workspaces the service's sessions are live ones instead
(``verifiers.service.live``: a persistent shell, processes kept); this store serves a
backend without them (``process`` with ``--allow-weak-isolation`` and no namespaces, say)
and ``--session-mode packed``. A session is a private host directory of files plus its
limits. Each exec is one ordinary sandbox run: the session's files go in (through the
``session_exec`` guest, which unpacks them as the run's own), the command runs, and every
regular file left in the scratch directory comes back and replaces the session's files. So
what persists between execs is the file tree (up to ``max_bytes``); what does not is any
process, environment variable, working-directory change or open socket: each exec starts
from a fresh sandbox. An exec stopped by a sandbox limit (wall, memory...) before the files
were packed leaves the session's files as they were before it. Execs on one session run one
at a time; a write waits for the exec in progress (whose result would replace it), a read
only for the swap of the directory at the exec's end.

The host counts what an exec returns itself: the quota (``max_bytes``) is enforced on the
decoded files, the exit status and time-out come from the sandbox, and a report the code in
the sandbox forged or broke changes at most which files (within the quota) the session keeps.
A session in use (an exec queued or running, a read or write) is never reaped: the idle TTL
counts from the end of its last call.

Isolation between sessions is the sandbox's (each run sees only the files sent in) plus
unguessable ids; every client holding the service token may reach any session whose id it
knows. Not guarded against: a session id leaked to another client.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import secrets
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tasksieve.verifiers.sandbox.base import Execution, Limits, Sandbox
from tasksieve.verifiers.sandbox.guest import bundle
from tasksieve.verifiers.sandbox.support import check_name
from tasksieve.verifiers.service.guest import session_exec as guest
from tasksieve.verifiers.service.registry import SessionError, SessionRegistry

GUEST_SOURCE = bundle(guest.__file__)


@dataclass
class Session:
    """One session: its directory, limits, and when it expires if left idle.

    ``lock`` orders execs and writes; ``files_lock`` guards the directory itself (an exec
    swaps it for a new one) so reads never see it half replaced. ``in_use`` counts calls in
    progress: a session in use never expires, and its idle time starts when the last ends.
    """

    id: str
    root: Path
    limits: Limits
    ttl_s: float
    created: float = field(default_factory=time.time)
    last_used: float = field(default_factory=time.monotonic)
    lock: threading.Lock = field(default_factory=threading.Lock)
    files_lock: threading.Lock = field(default_factory=threading.Lock)
    in_use: int = 0
    closed: bool = False

    @property
    def expires_in(self) -> float:
        if self.in_use:
            return self.ttl_s
        return self.ttl_s - (time.monotonic() - self.last_used)


@dataclass(frozen=True)
class Command:
    """What an exec runs: ``argv``; ``shell`` (bash code) runs in a live session's own shell
    (a packed session runs the same code through ``argv``); ``files``: list the files after."""

    argv: list[str]
    shell: str | None = None
    files: bool = True


@dataclass(frozen=True)
class ExecResult:
    """What one exec did, and the files it left (names only; the bytes stay in the session)."""

    execution: Execution
    exit_code: int | None
    timed_out: bool
    files: list[str]
    dropped: list[str]
    files_kept: bool  # False when the run died before packing its files (limit hit)


class SessionStore(SessionRegistry[Session]):
    """Creates, finds, runs and reaps sessions over one sandbox."""

    live = False

    def __init__(self, sandbox: Sandbox, max_sessions: int, max_bytes: int) -> None:
        super().__init__()
        self.sandbox = sandbox
        self.max_sessions = max_sessions
        self.max_bytes = max_bytes
        self._base = Path(tempfile.mkdtemp(prefix="tasksieve-sessions-"))
        os.chmod(self._base, 0o700)

    def create(self, limits: Limits, ttl_s: float, lifetime_s: float | None = None) -> Session:
        """A new session (``lifetime_s`` is ignored: a packed session holds no process)."""
        with self._lock:
            if len(self._sessions) >= self.max_sessions:
                raise SessionError(f"too many sessions (max {self.max_sessions})", 429)
            sid = secrets.token_urlsafe(18)
            root = self._base / sid
            root.mkdir(mode=0o700)
            session = Session(sid, root, limits, ttl_s)
            self._sessions[sid] = session
            return session

    def delete(self, sid: str) -> bool:
        with self._lock:
            session = self._sessions.pop(sid, None)
        if session is None:
            return False
        with session.lock, session.files_lock:  # an exec in progress finishes first
            session.closed = True
            shutil.rmtree(session.root, ignore_errors=True)
        return True

    def close(self) -> None:
        for sid in list(self._sessions):
            self.delete(sid)
        shutil.rmtree(self._base, ignore_errors=True)

    # ------------------------------------------------------------------ files
    def room_for(self, session: Session, name: str) -> int:
        """Bytes a PUT of ``name`` may hold now (the file it replaces does not count)."""
        path = self._path(session, name)
        with session.files_lock:
            return self.max_bytes - self._size(session) + _size_of(path)

    def put_file(self, session: Session, name: str, data: bytes) -> None:
        path = self._path(session, name)
        with session.lock, session.files_lock:
            if session.closed:
                raise SessionError(f"session {session.id} was deleted", 404)
            if self._size(session) - _size_of(path) + len(data) > self.max_bytes:
                raise SessionError(f"session files would exceed {self.max_bytes} bytes", 413)
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                if path.is_symlink() or path.is_dir():
                    raise IsADirectoryError(name)
                path.write_bytes(data)
            except (NotADirectoryError, FileExistsError, IsADirectoryError) as exc:
                raise SessionError(
                    f"cannot write {name!r}: a file and a directory would share a path", 409
                ) from exc

    def get_file(self, session: Session, name: str) -> bytes:
        path = self._path(session, name)
        with session.files_lock:
            if path.is_symlink() or not path.is_file():
                raise SessionError(f"no file {name!r} in session {session.id}", 404)
            return path.read_bytes()

    def list_files(self, session: Session) -> dict[str, int]:
        with session.files_lock:
            return self._list(session)

    def _list(self, session: Session) -> dict[str, int]:
        return {
            str(p.relative_to(session.root)): p.stat().st_size
            for p in sorted(session.root.rglob("*"))
            if p.is_file() and not p.is_symlink()
        }

    # ------------------------------------------------------------------ exec
    def exec(
        self, session: Session, command: Command, stdin: bytes, timeout_s: float
    ) -> ExecResult:
        """Run ``argv`` over the session's files; keep the files it leaves, within the quota.

        What comes back is measured here: the exit status and the duration are the sandbox's,
        and the files are decoded, name-checked and counted against ``max_bytes`` by the host;
        nothing the guest (or code that overwrote its report) claims is taken as given.
        """
        argv = command.argv
        with session.lock:
            if session.closed:
                raise SessionError(f"session {session.id} was deleted", 404)
            with session.files_lock:
                files = {
                    name: base64.b64encode((session.root / name).read_bytes()).decode("ascii")
                    for name in self._list(session)
                }
            request: dict[str, Any] = {"files": files, "argv": argv, "timeout_s": timeout_s}
            request["max_bytes"] = self.max_bytes  # the guest's own cut; the host counts again
            ex = self.sandbox.run(
                {guest.IN_NAME: json.dumps(request), guest.SELF_NAME: GUEST_SOURCE},
                [self.sandbox.python, "-I", "-S", guest.SELF_NAME],
                self._limits(session, timeout_s),
                stdin=stdin,
                collect=(guest.OUT_NAME,),
            )
            timed_out = ex.limit_hit == "wall" or ex.duration_s >= timeout_s
            exit_code = None if timed_out else ex.exit_code
            kept = self._read_report(ex.files.get(guest.OUT_NAME))
            if kept is None:  # killed by a limit before packing, or an unreadable report
                reported = guest.OUT_NAME in ex.files
                if ex.limit_hit is None and ex.infra_error is None and not reported:
                    why = ex.stderr.decode("utf-8", "replace")[-500:]
                    ex = replace(ex, infra_error=f"session step reported nothing: {why}")
                return ExecResult(ex, exit_code, timed_out, [], [], False)
            chosen, dropped = kept
            stored = self._replace(session, chosen)
            dropped += sorted(set(chosen) - set(stored))
            return ExecResult(ex, exit_code, timed_out, sorted(stored), dropped, True)

    def _limits(self, session: Session, timeout_s: float) -> Limits:
        lim = session.limits
        return Limits(
            wall_s=timeout_s + 5.0,
            cpu_s=lim.cpu_s + 2.0,  # the session's CPU budget per exec, plus packing
            memory_mb=lim.memory_mb,
            max_processes=lim.max_processes,
            max_output_bytes=lim.max_output_bytes,
            max_file_bytes=3 * self.max_bytes + 1_000_000,
            scratch_mb=max(lim.scratch_mb, 4 * self.max_bytes // 1_000_000 + 16),
        )

    def _read_report(self, raw: bytes | None) -> tuple[dict[str, bytes], list[str]] | None:
        """(files to keep, names dropped) from the guest's report, counted here: names
        checked, reserved names skipped, files past ``max_bytes`` in name order dropped."""
        if raw is None:
            return None
        try:
            report = json.loads(raw)
            files = report["files"]
            if not isinstance(files, dict):
                return None
        except (ValueError, KeyError, TypeError):
            return None
        kept: dict[str, bytes] = {}
        dropped = _names(report.get("dropped"))  # what the guest left out (names only)
        total = 0
        for name in sorted(n for n in files if isinstance(n, str)):
            data = files[name]
            try:
                check_name(name)
                if "\x00" in name or name in guest.RESERVED or not isinstance(data, str):
                    raise ValueError(name)
                content = base64.b64decode(data, validate=True)
            except (ValueError, binascii.Error):
                dropped.append(name[:200])
                continue
            if total + len(content) > self.max_bytes:
                dropped.append(name)
                continue
            kept[name] = content
            total += len(content)
        return kept, dropped

    def _replace(self, session: Session, files: dict[str, bytes]) -> list[str]:
        """Make the session's directory hold ``files`` (names checked already); returns the
        names stored (one that clashes with a directory of another is left out)."""
        staging = Path(tempfile.mkdtemp(dir=self._base, prefix=".staging-"))
        stored: list[str] = []
        for name, content in files.items():
            path = staging / name
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(content)
            except (NotADirectoryError, FileExistsError, IsADirectoryError):
                continue
            stored.append(name)
        with session.files_lock:
            old = session.root.with_name(session.root.name + ".old")
            session.root.rename(old)
            staging.rename(session.root)
        shutil.rmtree(old, ignore_errors=True)
        return stored

    def _path(self, session: Session, name: str) -> Path:
        try:
            check_name(name)
            if "\x00" in name:
                raise ValueError(f"a file name may not hold a NUL byte, got {name[:80]!r}")
        except ValueError as exc:
            raise SessionError(str(exc)) from exc
        if name in guest.RESERVED:
            raise SessionError(f"{name!r} is reserved by the service")
        return session.root / name

    def _size(self, session: Session) -> int:
        return sum(self._list(session).values())


def _names(value: object, most: int = 1000) -> list[str]:
    """The valid file names in ``value`` (a list the guest reported), at most ``most``."""
    out: list[str] = []
    for name in value[:most] if isinstance(value, list) else []:
        try:
            if isinstance(name, str) and "\x00" not in name:
                check_name(name)
                out.append(name)
        except ValueError:
            continue
    return out


def _size_of(path: Path) -> int:
    """The size of the regular file at ``path``; 0 when there is none."""
    try:
        return path.stat().st_size if path.is_file() and not path.is_symlink() else 0
    except OSError:
        return 0
