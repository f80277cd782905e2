"""What the verdict and detector halves of the rollout cache share: one kind of entries per
cache directory, loaded once per worker process (``apache_beam.utils.shared``), new entries
buffered per DoFn instance and written as one part per ``flush``.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from apache_beam.utils import shared

from tasksieve.transforms.rollouts.cache.store import load, write_part
from tasksieve.transforms.runtime.common import count

log = logging.getLogger("tasksieve.rollout_cache")


class Loaded:
    """The entries of one kind in one cache directory (weakly referenceable for ``Shared``)."""

    def __init__(self, root: str, kind: str) -> None:
        self.entries, self.corrupt = load(root, kind)
        self.lock = threading.Lock()

    def report_corrupt(self) -> None:
        """Count the corrupt entries met while loading, once (setup has no metrics context)."""
        with self.lock:
            corrupt, self.corrupt = self.corrupt, 0
        if corrupt:
            count("cache.corrupt_entries", corrupt)


class PartCache:
    """Entries of ``kind`` under ``root``, the sandbox settings their keys hold, and the new
    entries waiting to be written. Pickled with its DoFn without what ``setup`` makes."""

    kind: str = ""
    noun: str = "entries"  # what a failed write says it lost

    def __init__(self, root: str, sandbox: dict[str, Any]) -> None:
        self.root = root
        self.sandbox = sandbox
        self.handle = shared.Shared()
        self.loaded: Loaded | None = None
        self.pending: dict[str, Any] = {}
        self.lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        return {"root": self.root, "sandbox": self.sandbox, "handle": self.handle}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.loaded, self.pending, self.lock = None, {}, threading.Lock()

    def setup(self) -> None:
        """Load (or share) this worker process's copy of the cached entries."""
        root, kind = self.root, self.kind
        self.loaded = self.handle.acquire(lambda: Loaded(root, kind), tag=f"{root}#{kind}")

    def flush(self) -> None:
        """Write the entries computed since the last flush as one part."""
        with self.lock:
            pending, self.pending = self.pending, {}
        try:
            write_part(self.root, self.kind, pending)
        except Exception as exc:  # the run goes on; these are computed again next time
            count("cache.write_errors")
            log.warning("rollout cache: could not store %d %s: %s", len(pending), self.noun, exc)
