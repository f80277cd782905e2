"""A small pool of warm worker processes answering JSON-line requests under a wall-clock bound.

Each worker is a long-lived child (``argv``) that prints ``{"ready": true}`` once it has
imported what it needs, then answers one JSON line per request line, in order. ``call`` takes an
idle worker (starting one when fewer than ``max_workers`` exist, else waiting for one), sends the
request and waits at most ``timeout_s`` for the answer; a worker that overruns is killed
(SIGKILL) and forgotten, and the next call that needs one starts a fresh one. Start-up time is
not part of a call's bound: a worker must be ready within ``start_timeout_s``.

Thread-safe: concurrent calls use distinct workers. Workers die with their pipes when the host
process goes away (they read EOF), and ``close`` kills them at once.

It does NOT guard against: a worker's memory (no rlimit is set here), a request write that
blocks because a worker stopped reading without exiting (workers read each request whole
before working on it), or anything the worker program itself does wrong.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import tempfile
import threading
import time
import weakref
from collections.abc import Mapping
from typing import IO, Any


class WorkerTimeout(Exception):
    """The worker did not answer within the call's bound; it has been killed."""


class WorkerFailed(Exception):
    """The worker could not start, died, or answered nonsense; the message says which."""


class _Worker:
    """One child process and the unread part of its stdout."""

    def __init__(self, argv: list[str], env: Mapping[str, str], start_timeout_s: float) -> None:
        self._stderr: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 (closed by kill)
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=dict(env),
            close_fds=True,
        )
        self._buffer = bytearray()
        self.generation = 0
        try:
            hello = self._read_line(time.monotonic() + start_timeout_s, "start")
        except BaseException:
            self.kill()
            raise
        if hello.get("ready") is not True:
            self.kill()
            raise WorkerFailed(f"worker did not start: {hello!r}"[:300])

    @property
    def pid(self) -> int:
        return self.proc.pid

    def request(self, message: Mapping[str, Any], timeout_s: float) -> dict[str, Any]:
        """Send one request and return the answer; raises WorkerTimeout or WorkerFailed."""
        assert self.proc.stdin is not None
        deadline = time.monotonic() + timeout_s
        try:
            self.proc.stdin.write(json.dumps(message).encode("utf-8") + b"\n")
            self.proc.stdin.flush()
        except OSError as e:
            raise WorkerFailed(f"worker gone before the request: {e}; {self._tail()}") from None
        return self._read_line(deadline, "request")

    def _read_line(self, deadline: float, phase: str) -> dict[str, Any]:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                self.kill()
                if phase == "start":
                    raise WorkerFailed("worker not ready in time")
                raise WorkerTimeout(phase)
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                try:
                    code: int | None = self.proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    code = None  # closed its stdout but lingers: killed below
                tail = self._tail()
                self.kill()
                raise WorkerFailed(f"worker exited ({code}); {tail}")
            self._buffer += chunk
        line, _, rest = bytes(self._buffer).partition(b"\n")
        self._buffer = bytearray(rest)
        try:
            answer = json.loads(line)
        except ValueError:
            self.kill()
            raise WorkerFailed(f"unreadable answer {line[:100]!r}") from None
        if not isinstance(answer, dict):
            self.kill()
            raise WorkerFailed(f"unreadable answer {line[:100]!r}")
        return answer

    def _tail(self) -> str:
        try:
            self._stderr.seek(0, os.SEEK_END)
            size = self._stderr.tell()
            self._stderr.seek(max(0, size - 600))
            text = self._stderr.read().decode("utf-8", "replace")
        except (OSError, ValueError):
            return "no stderr"
        return "stderr: " + " | ".join(text.strip().splitlines()[-4:])

    def kill(self) -> None:
        """Kill the process (if alive) and reap it."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        self._stderr.close()


def _kill_all(workers: list[_Worker]) -> None:
    for worker in workers:
        worker.kill()
    workers.clear()


class WorkerPool:
    """At most ``max_workers`` warm workers running ``argv``; ``call`` bounds each request."""

    def __init__(
        self,
        argv: list[str],
        env: Mapping[str, str],
        max_workers: int,
        start_timeout_s: float,
    ) -> None:
        if max_workers < 1:
            raise ValueError(f"need max_workers >= 1, got {max_workers}")
        self._argv = list(argv)
        self._env = dict(env)
        self._max = max_workers
        self._start_timeout_s = start_timeout_s
        self._idle: list[_Worker] = []
        self._busy: set[_Worker] = set()
        self._live = 0
        self._generation = 0  # bumped by close: workers of an older one are not reused
        self._changed = threading.Condition()
        self._finalizer = weakref.finalize(self, _kill_all, self._idle)

    def call(self, message: Mapping[str, Any], timeout_s: float) -> dict[str, Any]:
        """The answer to ``message`` from one worker within ``timeout_s`` seconds of sending.

        Raises WorkerTimeout (the worker was killed) or WorkerFailed (it could not start, died,
        or answered nonsense).
        """
        worker = self._take()
        try:
            answer = worker.request(message, timeout_s)
        except BaseException:
            worker.kill()
            self._release(worker, alive=False)
            raise
        self._release(worker)
        return answer

    def idle_pids(self) -> list[int]:
        """The process ids of the idle workers (for tests and diagnostics)."""
        with self._changed:
            return [w.pid for w in self._idle]

    def busy_pids(self) -> list[int]:
        """The process ids of the workers answering a call now (for tests and diagnostics)."""
        with self._changed:
            return [w.pid for w in self._busy]

    def close(self) -> None:
        """Kill the idle workers now; busy ones are killed when their call returns.

        The pool stays usable: a later call starts a fresh worker.
        """
        with self._changed:
            self._live -= len(self._idle)
            self._generation += 1
            _kill_all(self._idle)

    def _take(self) -> _Worker:
        """An idle live worker, or a new one; one that died while idle is replaced silently."""
        with self._changed:
            while True:
                while not self._idle and self._live >= self._max:
                    self._changed.wait()
                if not self._idle:
                    break
                worker = self._idle.pop()
                if worker.proc.poll() is None:
                    self._busy.add(worker)
                    return worker
                worker.kill()  # died while idle (e.g. the OOM killer): says nothing of a call
                self._live -= 1
            self._live += 1
            generation = self._generation
        try:
            worker = _Worker(self._argv, self._env, self._start_timeout_s)
        except BaseException:
            self._release(None, alive=False)
            raise
        worker.generation = generation
        with self._changed:
            self._busy.add(worker)
        return worker

    def _release(self, worker: _Worker | None, alive: bool = True) -> None:
        """Return a worker after a call (``alive``: reusable), or account for a lost one."""
        with self._changed:
            if worker is not None:
                self._busy.discard(worker)
            if worker is not None and alive and worker.generation != self._generation:
                worker.kill()
                alive = False
            if worker is None or not alive:
                self._live -= 1
            else:
                self._idle.append(worker)
            self._changed.notify()
