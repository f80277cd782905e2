"""Host side of a container's stdio stream: JSON lines out, framed replies in.

The engine multiplexes a non-TTY container's stdout and stderr over one socket (8-byte
headers); ``Channel`` strips those, keeps a short tail of stderr for error messages and cuts
stdout into the ``docker_server`` frames (type byte, 4-byte length, payload). Requests go out
as ASCII JSON lines, which can never contain the engine's detach keys (set explicitly to
control bytes, whatever the user's docker config says). It does NOT authenticate the peer
(anything with access to the engine socket can attach too) and is not a security boundary:
what runs in the container never writes to this stream directly.
"""

from __future__ import annotations

import contextlib
import json
import select
import socket
import struct
import threading
import time
from typing import Any

from tasksieve.verifiers.sandbox.docker.guest.server import FRAME

DETACH_KEYS = "ctrl-^,ctrl-_"
MAX_FRAME = 1 << 26
_MUX = struct.Struct(">BxxxI")
_CHUNK = 65536


class ChannelClosed(Exception):
    """The container's stream ended (the container stopped) or broke the framing."""


class Channel:
    """One attached stream to a container process (the server or the root writer)."""

    def __init__(self, sio: Any, prefix: bytes = b"") -> None:
        self._sio = sio  # keeps the HTTP response (and so the socket) alive
        self.sock: socket.socket = getattr(sio, "_sock", sio)
        self.sock.settimeout(None)
        self._raw = bytearray(prefix)
        self._data = bytearray()
        self.stderr_tail = bytearray()
        self._send_lock = threading.Lock()
        self.closed = False

    def send(self, obj: dict[str, Any]) -> None:
        """Send one request line."""
        line = json.dumps(obj, separators=(",", ":")).encode("ascii") + b"\n"
        with self._send_lock:
            try:
                self.sock.sendall(line)
            except OSError as e:
                raise ChannelClosed(f"cannot write to the container: {e}") from e

    def recv(self, timeout: float | None = None) -> tuple[bytes, bytes]:
        """The next frame as ``(type, payload)``; ``TimeoutError`` after ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if len(self._data) >= FRAME.size:
                kind, size = FRAME.unpack_from(self._data)
                if size > MAX_FRAME:
                    raise ChannelClosed(f"frame of {size} bytes from the container")
                if len(self._data) >= FRAME.size + size:
                    payload = bytes(self._data[FRAME.size : FRAME.size + size])
                    del self._data[: FRAME.size + size]
                    return kind, payload
            self._fill(deadline)

    def recv_json(self, kind: bytes, timeout: float | None = None) -> dict[str, Any]:
        """The next frame, which must be a JSON frame of type ``kind``."""
        got, payload = self.recv(timeout)
        if got == b"!":
            raise ChannelClosed(f"container refused the request: {payload[:300]!r}")
        if got != kind:
            raise ChannelClosed(f"expected a {kind!r} frame, got {got!r}")
        obj = json.loads(payload)
        if not isinstance(obj, dict):
            raise ChannelClosed(f"expected a JSON object, got {payload[:100]!r}")
        return obj

    def close(self) -> None:
        """Close the socket (the container keeps running)."""
        self.closed = True
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self.sock.close()
        with contextlib.suppress(Exception):
            self._sio.close()

    def _fill(self, deadline: float | None) -> None:
        """Read from the socket and demultiplex until more stdout arrived."""
        while True:
            while len(self._raw) >= _MUX.size:
                stream, size = _MUX.unpack_from(self._raw)
                if len(self._raw) < _MUX.size + size:
                    break
                payload = self._raw[_MUX.size : _MUX.size + size]
                del self._raw[: _MUX.size + size]
                if stream == 1:
                    self._data += payload
                    return
                self.stderr_tail = (self.stderr_tail + payload)[-4000:]
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([self.sock], [], [], left)[0]:
                    raise TimeoutError("no reply from the container in time")
            try:
                chunk = self.sock.recv(_CHUNK)
            except OSError as e:
                raise ChannelClosed(f"stream from the container broke: {e}") from e
            if not chunk:
                tail = bytes(self.stderr_tail).decode(errors="replace").strip()[-300:]
                raise ChannelClosed("the container's stream ended" + (f": {tail}" if tail else ""))
            self._raw += chunk


def attach(api: Any, container_id: str) -> Channel:
    """Attach to a started container's stdin/stdout/stderr (no logs replayed)."""
    params = {"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1, "detachKeys": DETACH_KEYS}
    sio = api.attach_socket(container_id, params=params)
    return Channel(sio, _buffered(sio))


def exec_channel(api: Any, container_id: str, cmd: list[str], user: str) -> Channel:
    """Start a long-lived exec with attached stdin and return its stream."""
    eid = api.exec_create(container_id, cmd, stdin=True, user=user, detach_keys=DETACH_KEYS)
    sio = api.exec_start(eid["Id"], socket=True)
    return Channel(sio, _buffered(sio))


def _buffered(sio: Any) -> bytes:
    """Bytes http.client already read past the upgrade response into its buffer."""
    fp = getattr(
        getattr(getattr(getattr(sio, "_response", None), "raw", None), "_fp", None), "fp", None
    )
    if fp is None or not hasattr(fp, "peek"):
        return b""
    sock = getattr(sio, "_sock", sio)
    sock.setblocking(False)
    try:
        return bytes(fp.read(len(fp.peek(_CHUNK))) or b"")
    except (BlockingIOError, OSError, ValueError):
        return b""
    finally:
        sock.setblocking(True)
