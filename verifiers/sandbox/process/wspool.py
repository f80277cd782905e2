"""Pre-started workspace sessions: ``open_workspace`` without starting anything.

A cold session costs a namespace setup and an interpreter start (tens of milliseconds, more
on a loaded machine). ``WorkspacePool`` keeps ``size`` sessions of one spec started ahead (a
background thread refills it), each with its namespaces, root and empty copy-on-write layer
in place, and pinged every ``idle_s / 4`` so none idles out while it waits; ``take`` hands
one out (no round trip: its clocks restart on the host now and in the guest with the next
request), or opens one cold when none is ready. A pooled session is a fresh one: nothing ran
in it.

It does NOT make the work disappear: the refill still costs a cold start per session, paid
in the background; a pooled session that idles out (``idle_s``) is dropped and replaced.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from tasksieve.verifiers.sandbox.workspace import WorkspaceError, WorkspaceSpec
from tasksieve.verifiers.sandbox.wsclient import GuestSession


class WorkspacePool:
    """``size`` started sessions of ``spec``, refilled in the background (see module doc)."""

    def __init__(
        self, opener: Callable[[WorkspaceSpec], GuestSession], spec: WorkspaceSpec, size: int
    ) -> None:
        if size < 1:
            raise ValueError(f"need a pool size >= 1, got {size}")
        self.opener, self.spec, self.size = opener, spec, size
        self._ready: list[GuestSession] = []
        self._lock = threading.Condition()
        self._closed = False
        self.error: str | None = None
        self._thread = threading.Thread(target=self._fill, daemon=True, name="ws-pool")
        self._thread.start()

    def _fill(self) -> None:
        while True:
            with self._lock:
                while not self._closed and len(self._ready) >= self.size:
                    self._lock.wait(1.0)
                    self._ready = [s for s in self._ready if s.alive]
                    stale = [s for s in self._ready if self._stale(s)]
                    if stale:
                        break
                if self._closed:
                    return
                stale = [s for s in self._ready if self._stale(s)]
            for session in stale:  # keep waiting sessions from idling out
                session.ping()
            if len(self._ready) >= self.size:
                continue
            try:
                session = self.opener(self.spec)
            except (WorkspaceError, OSError) as e:
                self.error = str(e)
                with self._lock:
                    self._lock.wait(1.0)
                continue
            with self._lock:
                if self._closed:
                    session.close()
                    return
                self._ready.append(session)
                self._lock.notify_all()

    def _stale(self, session: GuestSession) -> bool:
        return time.monotonic() - session.last_used > self.spec.limits.idle_s / 4

    def take(self) -> GuestSession:
        """A started session of ``spec`` (cold when none is ready); the caller closes it."""
        while True:
            with self._lock:
                session = self._ready.pop(0) if self._ready else None
                self._lock.notify_all()
            if session is None:
                return self.opener(self.spec)
            if session.hand_out():
                return session
            session.close()

    def wait_ready(self, timeout: float) -> bool:
        """Wait until ``size`` sessions are ready; False on timeout."""
        with self._lock:
            return self._lock.wait_for(lambda: len(self._ready) >= self.size, timeout)

    def close(self) -> None:
        """Stop refilling and close every session not handed out."""
        with self._lock:
            self._closed = True
            ready, self._ready = self._ready, []
            self._lock.notify_all()
        self._thread.join(timeout=60)
        for session in ready:
            session.close()
