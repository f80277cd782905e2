"""Idempotency keys: a retried request with a key already seen gets the first answer.

The store maps (client, key) to the first request's future and a fingerprint of its body; a
second request with the same key waits on that future instead of running again. Entries live
``ttl_s`` after they are created and at most ``max_entries`` are kept (the oldest go first).
A request that never ran (queue full, deadline passed) is forgotten so that its retry can run.

Not guarded against: a retry that reaches a *different* server (each server keeps its own
store; the client sends the same key everywhere, so a request lost with a dead server runs
once on the next one), nor a retry later than ``ttl_s``.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any


class KeyConflict(Exception):
    """The key was used before with a different request body."""


@dataclass
class _Entry:
    future: Future[Any]
    fingerprint: str
    created: float


class IdempotencyStore:
    """Bounded, time-limited map from idempotency key to the first request's future."""

    def __init__(self, ttl_s: float = 600.0, max_entries: int = 100_000) -> None:
        if ttl_s <= 0 or max_entries < 1:
            raise ValueError("need idempotency ttl_s > 0 and max_entries >= 1")
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def claim(self, key: str, fingerprint: str) -> tuple[Future[Any], bool]:
        """(future, first): the future to await, and whether this caller must run the job.

        Raises ``KeyConflict`` when ``key`` was claimed with another fingerprint.
        """
        now = time.monotonic()
        with self._lock:
            self._expire(now)
            entry = self._entries.get(key)
            if entry is not None:
                if entry.fingerprint != fingerprint:
                    raise KeyConflict(f"idempotency key {key!r} was used for another request")
                return entry.future, False
            future: Future[Any] = Future()
            self._entries[key] = _Entry(future, fingerprint, now)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
            return future, True

    def forget(self, key: str) -> None:
        """Drop ``key`` (its request never ran, so a retry may run it)."""
        with self._lock:
            self._entries.pop(key, None)

    def _expire(self, now: float) -> None:
        while self._entries:
            key, entry = next(iter(self._entries.items()))
            if now - entry.created <= self.ttl_s:
                return
            del self._entries[key]
