"""Live progress of a run: counter deltas that stages append to a channel directory.

Every ``count()`` of ``transforms.runtime.common`` (and every rejection, by stage) also calls
``report(name, n)`` here. With no channel configured, ``report`` returns after one lookup and
nothing is written. With one, each process adds the deltas up in memory and appends them as one
JSON line to its own file ``<channel>/<pid>-<token>.jsonl`` at most every ``INTERVAL_S`` seconds
(a timer thread writes what is pending, so a quiet stage's last counts are not held back), and
once more when the process exits. A line is ``{"t": wall seconds, "c": {name: delta, ...}}``;
the reader adds the deltas of every file up (``tasksieve.pipeline.curate.progress``).

Where the channel is: the environment variable ``TASKSIEVE_PROGRESS`` (the in-memory and the
multi-process DirectRunner, whose workers inherit the environment); else the directory a
pipeline step named for the whole process (``use``; the threads of a portable runner's worker
pool, which see neither that environment nor the options); else the pipeline option
``--tasksieve_progress`` that Beam hands to SDK workers it starts with ``sdk_worker_main``.
Standard library only: the reporting side must stay cheap to import and to call.

It does NOT guarantee that every delta arrives: a worker killed outright (SIGKILL, out of
memory) loses what it had pending, a worker on another machine writes to its own disk where the
reader never looks, and a bundle that Beam retries reports its counts again. The run's counts of
record are Beam's metrics in the manifest; these events only say how far a run is. A failing
write (the channel removed, a full disk) turns reporting off in that process, never the run.
"""

from __future__ import annotations

import atexit
import json
import os
import secrets
import sys
import threading
import time

ENV = "TASKSIEVE_PROGRESS"
"""The environment variable naming the channel directory."""
OPTION = "tasksieve_progress"
"""The Beam pipeline option naming the channel directory (for SDK workers of portable runners)."""
INTERVAL_S = 0.5
"""The longest a delta waits before it is written, and the shortest time between two writes."""
SUFFIX = ".jsonl"


_used: str | None = None
"""The channel a pipeline step named for this whole process (``use``)."""


def use(directory: str | None) -> None:
    """Report to ``directory`` from every thread of this process (None: stop).

    For SDK workers that see neither the environment nor the pipeline options (the threads of
    Beam's external worker pool): ``transforms.runtime.common.ProgressChannel`` calls it when
    its DoFn is set up on a worker. The setting outlives the job in a long-lived worker process.
    """
    global _used
    _used = directory


def channel() -> str | None:
    """The channel directory this process reports to, or None (report nothing)."""
    path = os.environ.get(ENV) or _used
    if path:
        return path
    provider = sys.modules.get("apache_beam.options.value_provider")
    if provider is None:
        return None
    options = getattr(provider.RuntimeValueProvider, "runtime_options", None)
    value = options.get(OPTION) if isinstance(options, dict) else None
    return value if isinstance(value, str) and value else None


class _Writer:
    """The pending deltas of one process for one channel, and the file they go to."""

    def __init__(self, directory: str) -> None:
        self.path = os.path.join(directory, f"{os.getpid()}-{secrets.token_hex(4)}{SUFFIX}")
        self.pending: dict[str, int] = {}
        self.lock = threading.Lock()
        self.armed = False
        self.broken = False

    def add(self, name: str, n: int) -> None:
        with self.lock:
            self.pending[name] = self.pending.get(name, 0) + n
            if self.armed or self.broken:
                return
            self.armed = True
        timer = threading.Timer(INTERVAL_S, self.flush)
        timer.daemon = True
        timer.start()

    def flush(self) -> None:
        """Append what is pending as one line (one open, write and close)."""
        with self.lock:
            pending, self.pending, self.armed = self.pending, {}, False
            if not pending or self.broken:
                return
            line = json.dumps({"t": round(time.time(), 3), "c": pending}, separators=(",", ":"))
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
                try:
                    os.write(fd, (line + "\n").encode())
                finally:
                    os.close(fd)
            except OSError:
                self.broken = True


_writers: dict[tuple[int, str], _Writer] = {}
_writers_lock = threading.Lock()


def _writer(directory: str) -> _Writer:
    key = (os.getpid(), directory)
    found = _writers.get(key)
    if found is None:
        with _writers_lock:
            found = _writers.setdefault(key, _Writer(directory))
    return found


def report(name: str, n: int = 1) -> None:
    """Add ``n`` to counter ``name`` in the channel, if one is configured (else nothing)."""
    directory = channel()
    if directory is not None and n:
        _writer(directory).add(name, n)


def flush() -> None:
    """Write every pending delta of this process now (the driver calls it after a run)."""
    pid = os.getpid()
    for (owner, _), writer in list(_writers.items()):
        if owner == pid:
            writer.flush()


atexit.register(flush)
