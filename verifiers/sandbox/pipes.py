"""Non-blocking, bounded multiplexing of a child's pipes (no unbounded buffering, no deadlock).

Every reader keeps at most ``cap`` bytes; every write is queued and flushed as the other end
drains it, so a child that stops reading or floods its output can never block the parent.
It does NOT limit how fast a child produces output (CPU spent here grows with the flood until
the caller's cap or deadline stops it).
"""

from __future__ import annotations

import os
import selectors
import time
from collections.abc import Callable

_CHUNK = 65536


class Reader:
    """One readable pipe with a bounded buffer."""

    def __init__(self, fd: int, cap: int) -> None:
        self.fd = fd
        self.cap = cap
        self.buf = bytearray()
        self.eof = False
        self.overflow = False
        self.total = 0

    def take_line(self) -> bytes | None:
        """Remove and return the next complete line (without the newline), if any."""
        i = self.buf.find(b"\n")
        if i < 0:
            return None
        line = bytes(self.buf[:i])
        del self.buf[: i + 1]
        return line


class Pump:
    """Multiplexes several child pipes with one selector."""

    def __init__(self) -> None:
        self._sel = selectors.DefaultSelector()
        self._readers: dict[int, Reader] = {}
        self._pending: dict[int, bytearray] = {}
        self._close_after: set[int] = set()

    def add_reader(self, fd: int, cap: int) -> Reader:
        """Watch ``fd`` for output, keeping at most ``cap`` bytes buffered."""
        os.set_blocking(fd, False)
        reader = Reader(fd, cap)
        self._readers[fd] = reader
        self._sel.register(fd, selectors.EVENT_READ)
        return reader

    def write(self, fd: int, data: bytes, close_when_done: bool = False) -> None:
        """Queue ``data`` for ``fd``; optionally close ``fd`` once everything is written."""
        if fd not in self._pending:
            os.set_blocking(fd, False)
            try:  # the common case: the pipe has room, so skip a select round
                n = os.write(fd, data) if data else 0
            except BlockingIOError:
                n = 0
            except OSError:  # reader went away: drop it, as ``_write`` does
                n = len(data)
            data = data[n:]
            if not data:
                if close_when_done:
                    os.close(fd)
                return
            self._pending[fd] = bytearray()
            self._sel.register(fd, selectors.EVENT_WRITE)
        self._pending[fd] += data
        if close_when_done:
            self._close_after.add(fd)
        if not self._pending[fd] and close_when_done:
            self._finish_writer(fd)

    def pending(self, fd: int) -> int:
        """Bytes still queued for ``fd``."""
        return len(self._pending.get(fd, b""))

    def poll(self, timeout: float) -> None:
        """Move data for at most ``timeout`` seconds (one select round)."""
        if not self._sel.get_map():
            time.sleep(max(0.0, min(timeout, 0.05)))
            return
        for key, _ in self._sel.select(max(0.0, timeout)):
            fd = key.fd
            if fd in self._readers:
                self._read(self._readers[fd])
            elif fd in self._pending:
                self._write(fd)

    def _read(self, r: Reader) -> None:
        try:
            chunk = os.read(r.fd, _CHUNK)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:
            r.eof = True
            self._sel.unregister(r.fd)
            return
        r.total += len(chunk)
        room = r.cap - len(r.buf)
        if len(chunk) > room:
            r.overflow = True
            chunk = chunk[: max(0, room)]
        r.buf += chunk

    def _write(self, fd: int) -> None:
        buf = self._pending[fd]
        try:
            n = os.write(fd, buf[:_CHUNK]) if buf else 0
        except BlockingIOError:
            return
        except OSError:  # reader went away: drop what is queued
            buf.clear()
            self._finish_writer(fd)
            return
        del buf[:n]
        if not buf:
            self._finish_writer(fd)

    def _finish_writer(self, fd: int) -> None:
        self._sel.unregister(fd)
        del self._pending[fd]
        if fd in self._close_after:
            self._close_after.discard(fd)
            os.close(fd)

    def close(self) -> None:
        """Stop watching every fd; close unfinished ``close_when_done`` writers."""
        for fd in list(self._pending):
            self._sel.unregister(fd)
        self._pending.clear()
        for fd in self._close_after:  # writers we own that never finished
            os.close(fd)
        self._close_after.clear()
        self._sel.close()


def drain_until(pump: Pump, done: Callable[[], bool], deadline: float) -> bool:
    """Poll ``pump`` until ``done()`` is true or ``deadline`` passes; return ``done()``."""
    while not done():
        left = deadline - time.monotonic()
        if left <= 0:
            return done()
        pump.poll(min(left, 0.25))
    return True
