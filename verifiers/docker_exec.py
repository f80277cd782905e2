"""One ``docker exec`` session as a ``subprocess.Popen``-like object with real pipes.

The engine multiplexes stdout and stderr over one hijacked socket (8-byte frame headers); a
thread splits the frames into two OS pipes and another forwards a stdin pipe to the socket
(half-closing it at EOF), so callers can use selectors and the shared ``Pump`` exactly as with
a local process. It does NOT bound what it buffers beyond the pipes' own capacity (a writer
blocks until the caller reads), and it is not a security boundary: it only moves bytes.
"""

from __future__ import annotations

import contextlib
import os
import select
import socket
import struct
import subprocess
import threading
import time
from collections.abc import Callable
from typing import IO, Any

_CHUNK = 65536


def hijack(api: Any, exec_id: str) -> tuple[socket.socket, bytes]:
    """Start ``exec_id`` attached; return its raw socket and any bytes already buffered."""
    sio = api.exec_start(exec_id, socket=True)
    sock: socket.socket = getattr(sio, "_sock", sio)
    prefix = b""
    fp = getattr(
        getattr(getattr(getattr(sio, "_response", None), "raw", None), "_fp", None), "fp", None
    )
    if fp is not None and hasattr(fp, "peek"):
        # http.client may have read past the 101 response headers into its buffer.
        sock.setblocking(False)
        try:
            prefix = fp.read(len(fp.peek(_CHUNK)))
        except (BlockingIOError, OSError, ValueError):
            prefix = b""
        finally:
            sock.setblocking(True)
    sock.settimeout(None)
    return sock, prefix or b""


class ExecProcess:
    """A running exec: ``stdin``/``stdout``/``stderr`` pipes, ``poll``, ``wait``, ``kill``."""

    def __init__(
        self,
        api: Any,
        exec_id: str,
        sock: socket.socket,
        prefix: bytes,
        killer: Callable[[], None],
    ) -> None:
        self.api, self.exec_id, self._sock, self._killer = api, exec_id, sock, killer
        self.pid = 0  # no host pid: the process lives in the container's pid namespace
        self.returncode: int | None = None
        self.killed = False
        in_r, in_w = os.pipe()
        out_r, self._out_w = os.pipe()
        err_r, self._err_w = os.pipe()
        self._in_r = in_r
        self.stdin: IO[bytes] | None = open(in_w, "wb", buffering=0)  # noqa: SIM115
        self.stdout: IO[bytes] | None = open(out_r, "rb", buffering=0)  # noqa: SIM115
        self.stderr: IO[bytes] | None = open(err_r, "rb", buffering=0)  # noqa: SIM115
        self._eof = threading.Event()
        self._discard = threading.Event()
        for fd in (self._out_w, self._err_w):
            os.set_blocking(fd, False)
        self._threads = [
            threading.Thread(target=self._demux, args=(prefix,), daemon=True),
            threading.Thread(target=self._feed, daemon=True),
        ]
        for t in self._threads:
            t.start()

    # ------------------------------------------------------------------ Popen-like API
    def poll(self) -> int | None:
        """The exit code once the exec has ended (128+N for signal N), else None."""
        if self.returncode is None:
            info = self.api.exec_inspect(self.exec_id)
            if not info.get("Running") and info.get("ExitCode") is not None:
                self.returncode = int(info["ExitCode"])
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the exit code; ``subprocess.TimeoutExpired`` after ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        delay = 0.005
        while True:
            code = self.poll()
            if code is not None:
                return code
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(self.exec_id, timeout or 0.0)
            self._eof.wait(delay)
            delay = min(delay * 2, 0.1)

    def kill(self) -> None:
        """Kill every process of the run (the container is dedicated to it)."""
        self._discard.set()
        if self.returncode is None and not self.killed:
            self.killed = True
            self._killer()

    def close(self) -> None:
        """Close pipes and socket and stop the relay threads (after ``kill``)."""
        self._discard.set()
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self._sock.close()
        for f in (self.stdin, self.stdout, self.stderr):
            if f is not None:
                with contextlib.suppress(OSError):
                    f.close()
        for t in self._threads:
            t.join(timeout=2.0)

    # ------------------------------------------------------------------ relay threads
    def _demux(self, buf: bytes) -> None:
        data = bytearray(buf)
        fds = {1: self._out_w, 2: self._err_w}
        try:
            while True:
                while len(data) >= 8:
                    kind, size = data[0], struct.unpack(">I", data[4:8])[0]
                    if len(data) < 8 + size:
                        break
                    payload = memoryview(bytes(data[8 : 8 + size]))
                    del data[: 8 + size]
                    fd = fds.get(kind)
                    if fd is not None:
                        self._write(fd, payload)
                chunk = self._sock.recv(_CHUNK)
                if not chunk:
                    break
                data += chunk
        except OSError:  # caller closed the pipes or the socket: stop relaying
            pass
        finally:
            for fd in (self._out_w, self._err_w):
                with contextlib.suppress(OSError):
                    os.close(fd)
            self._eof.set()

    def _write(self, fd: int, payload: memoryview) -> None:
        """Write to a pipe; once the caller gave up (kill/close), drop data instead of blocking.

        The socket must keep draining: an undrained exec stream stalls the engine's other
        execs in the container, including the one that kills this run.
        """
        while payload and not self._discard.is_set():
            try:
                payload = payload[os.write(fd, payload) :]
            except BlockingIOError:
                select.select([], [fd], [], 0.05)

    def _feed(self) -> None:
        try:
            while True:
                chunk = os.read(self._in_r, _CHUNK)
                if not chunk:
                    break
                self._sock.sendall(chunk)
            self._sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                os.close(self._in_r)
