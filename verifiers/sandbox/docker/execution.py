"""One execution on a container's ``docker_server``: the request, its frames and its end report.

``start`` sends the run request; ``collect_run`` then reads frames to the end in the calling
thread (for ``run``), while ``RunProcess`` relays them into real OS pipes from a thread (for
``spawn``: callers use selectors and the shared ``Pump`` as with a local process) and forwards
a stdin pipe as ``stdin`` requests. Either way the stream is read up to the ``x`` frame, so
the channel stays in step for the container's next run. It does NOT bound what it buffers
beyond the pipes' own capacity (a writer blocks until the caller reads, and drops data once
the caller killed or closed the run), and it is not a security boundary: it only moves bytes.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import select
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO, Any

from tasksieve.verifiers.sandbox.docker.channel import Channel, ChannelClosed

_CHUNK = 65536
_END_GRACE_S = 10.0


@dataclass
class Outcome:
    """What the server reported at the end of a run (or why no report came)."""

    code: int | None = None
    killed: bool = False
    limit: str | None = None
    strays: int = 0
    left: list[str] = field(default_factory=list)
    files: dict[str, bytes] = field(default_factory=dict)
    error: str | None = None
    cpu_s: float | None = None  # the container's CPU time during the run, as the server read it

    @classmethod
    def parse(cls, payload: bytes) -> Outcome:
        """The outcome in an ``x`` frame."""
        d = json.loads(payload)
        return cls(
            code=None if d.get("code") is None else int(d["code"]),
            killed=bool(d.get("killed")),
            limit=d.get("limit"),
            strays=int(d.get("strays", 0)),
            left=[str(x) for x in d.get("left", [])],
            files={str(k): base64.b64decode(v) for k, v in d.get("files", {}).items()},
            cpu_s=_seconds(d.get("cpu_s")),
        )

    def usable(self, strict: bool) -> bool:
        """Whether the run ended normally (``strict``: and left no stray processes)."""
        return self.error is None and not (strict and self.strays > 0)


def _seconds(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
        return float(value)
    return None


def settle(chan: Channel, timeout: float = _END_GRACE_S) -> bool:
    """Read a run's ``c`` cleanup report; True when the container was left clean."""
    try:
        return not chan.recv_json(b"c", timeout).get("left", ["no list"])
    except (ChannelClosed, TimeoutError, ValueError):
        return False


def start(chan: Channel, request: dict[str, Any], stdin: bytes | None) -> None:
    """Send a run request, then ``stdin`` and its end when given."""
    chan.send({"op": "run", **request})
    if stdin is not None:
        for i in range(0, len(stdin), 1 << 20):
            chan.send({"op": "stdin", "data": base64.b64encode(stdin[i : i + (1 << 20)]).decode()})
        chan.send({"op": "eof"})


def next_frame(chan: Channel, timeout: float | None) -> tuple[bytes, bytes] | None:
    """The next frame, or None when ``timeout`` passed first."""
    try:
        return chan.recv(timeout)
    except TimeoutError:
        return None


class RunProcess:
    """A running execution: ``stdin``/``stdout``/``stderr`` pipes, ``poll``, ``wait``, ``kill``."""

    def __init__(self, chan: Channel) -> None:
        self.chan = chan
        self.pid = 0  # no host pid: the process lives in the container's pid namespace
        self.returncode: int | None = None
        self.killed = False
        self.outcome: Outcome | None = None
        in_r, in_w = os.pipe()
        out_r, self._out_w = os.pipe()
        err_r, self._err_w = os.pipe()
        self._in_r = in_r
        self.stdin: IO[bytes] | None = open(in_w, "wb", buffering=0)  # noqa: SIM115
        self.stdout: IO[bytes] | None = open(out_r, "rb", buffering=0)  # noqa: SIM115
        self.stderr: IO[bytes] | None = open(err_r, "rb", buffering=0)  # noqa: SIM115
        self._done = threading.Event()
        self._discard = threading.Event()
        for fd in (self._out_w, self._err_w):
            os.set_blocking(fd, False)
        self._threads = [
            threading.Thread(target=self._demux, daemon=True),
            threading.Thread(target=self._feed, daemon=True),
        ]
        for t in self._threads:
            t.start()

    # ------------------------------------------------------------------ Popen-like API
    def poll(self) -> int | None:
        """The exit code once the run has ended (128+N for signal N), else None."""
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the exit code; ``subprocess.TimeoutExpired`` after ``timeout`` seconds."""
        if not self._done.wait(timeout):
            raise subprocess.TimeoutExpired("sandbox run", timeout or 0.0)
        return -1 if self.returncode is None else self.returncode

    def kill(self) -> None:
        """Ask the server to kill every process of the run."""
        self._discard.set()
        if not self._done.is_set() and not self.killed:
            self.killed = True
            with contextlib.suppress(ChannelClosed):
                self.chan.send({"op": "kill"})

    def close(self) -> None:
        """Kill the run if it is still going and close the caller's pipes (no waiting)."""
        self.kill()
        for f in (self.stdin, self.stdout, self.stderr):
            if f is not None:
                with contextlib.suppress(OSError):
                    f.close()

    def finish(self, strict: bool) -> bool:
        """Wait for the end and cleanup reports; True when the container may be reused."""
        if not self._done.wait(_END_GRACE_S):
            self.chan.close()  # unblocks the relay; the container gets recycled
        for t in self._threads:
            t.join(timeout=2.0)
        if any(t.is_alive() for t in self._threads):  # it might still write to the channel
            return False
        outcome = self.outcome or Outcome(error="no end report from the sandbox server")
        return outcome.usable(strict) and settle(self.chan)

    # ------------------------------------------------------------------ relay threads
    def _demux(self) -> None:
        fds = {b"o": self._out_w, b"e": self._err_w}
        try:
            while True:
                kind, payload = self.chan.recv()
                if kind in fds:
                    self._write(fds[kind], memoryview(payload))
                elif kind == b"x":
                    self.outcome = Outcome.parse(payload)
                    self.returncode = self.outcome.code
                    break
                else:
                    self.outcome = Outcome(error=f"sandbox server: {payload[:300]!r}")
                    break
        except (ChannelClosed, OSError, ValueError) as e:
            self.outcome = Outcome(error=f"sandbox server stream: {e}")
        finally:
            for fd in (self._out_w, self._err_w):
                with contextlib.suppress(OSError):
                    os.close(fd)
            self._done.set()

    def _write(self, fd: int, payload: memoryview) -> None:
        """Write to a pipe; once the caller gave up (kill/close), drop data instead of blocking."""
        while payload and not self._discard.is_set():
            try:
                payload = payload[os.write(fd, payload) :]
            except BlockingIOError:
                select.select([], [fd], [], 0.05)

    def _feed(self) -> None:
        try:
            while True:
                chunk = os.read(self._in_r, _CHUNK)
                if not chunk or self._done.is_set():
                    break
                self.chan.send({"op": "stdin", "data": base64.b64encode(chunk).decode()})
            if not self._done.is_set():
                self.chan.send({"op": "eof"})
        except (OSError, ChannelClosed):
            pass
        finally:
            with contextlib.suppress(OSError):
                os.close(self._in_r)


def collect_run(
    chan: Channel,
    deadline: float,
    cap: int,
    on_timeout: Callable[[], None],
) -> tuple[Outcome, bytearray, bytearray, bool]:
    """Read a run's frames to its end; returns outcome, stdout, stderr and whether time ran out.

    ``on_timeout`` is called once at ``deadline`` (it asks the server to kill the run).
    """
    out, err = bytearray(), bytearray()
    bufs = {b"o": out, b"e": err}
    timed_out = False
    end_by = deadline
    try:
        while True:
            frame = next_frame(chan, max(0.0, end_by - time.monotonic()))
            if frame is None:
                if timed_out:
                    return Outcome(error="no end report after a kill"), out, err, True
                timed_out = True
                on_timeout()
                end_by = time.monotonic() + _END_GRACE_S
                continue
            kind, payload = frame
            if kind in bufs:
                buf = bufs[kind]
                buf += payload[: max(0, cap + 1 - len(buf))]
            elif kind == b"x":
                return Outcome.parse(payload), out, err, timed_out
            else:
                return Outcome(error=f"sandbox server: {payload[:300]!r}"), out, err, timed_out
    except (ChannelClosed, ValueError) as e:
        return Outcome(error=f"sandbox server stream: {e}"), out, err, timed_out
