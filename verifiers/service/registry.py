"""What both session stores share: finding a session by id, holding it in use, reaping it.

A store keeps its sessions in ``_sessions`` under ``_lock`` and implements ``delete``; a
session has ``id``, ``closed``, ``in_use``, ``last_used`` and ``expires_in`` (seconds left
before its idle TTL or lifetime ends it; a session in use does not expire).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Generic, Protocol, TypeVar


class SessionError(Exception):
    """A session call that cannot be served; ``status`` is the HTTP status to answer."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


class _Session(Protocol):
    id: str
    closed: bool
    in_use: int
    last_used: float

    @property
    def expires_in(self) -> float: ...


S = TypeVar("S", bound=_Session)


class SessionRegistry(Generic[S]):
    """Sessions by id: ``get``, ``use``, ``reap``; subclasses create and ``delete`` them."""

    def __init__(self) -> None:
        self._sessions: dict[str, S] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._sessions)

    def delete(self, sid: str) -> bool:
        raise NotImplementedError

    def get(self, sid: str) -> S:
        """The live session ``sid`` (a call on it: its idle time starts again)."""
        with self._lock:
            session = self._live(sid)
            session.last_used = time.monotonic()
            return session

    @contextlib.contextmanager
    def use(self, sid: str) -> Iterator[S]:
        """The session ``sid``, held in use (never reaped for idleness) until the block ends."""
        with self._lock:
            session = self._live(sid)
            session.in_use += 1
        try:
            yield session
        finally:
            with self._lock:
                session.in_use -= 1
                session.last_used = time.monotonic()

    def _live(self, sid: str) -> S:
        session = self._sessions.get(sid)
        if session is None or session.closed or session.expires_in <= 0:
            raise SessionError(f"no session {sid!r} (never created, deleted or expired)", 404)
        return session

    def reap(self) -> list[str]:
        """End every session past its idle TTL or lifetime; returns their ids."""
        with self._lock:
            expired = [s.id for s in self._sessions.values() if s.expires_in <= 0]
        return [sid for sid in expired if self.delete(sid)]
