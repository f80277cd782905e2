"""Frames between a workspace session's host and its guest agent: length-prefixed JSON.

One frame is a 4-byte big-endian length then that many bytes of UTF-8 JSON (one object).
Bytes travel base64-encoded (``b64``/``unb64``). Standard library only: imported by the host
client and inlined into the guest agent (see ``verifiers.sandbox.guest.bundle``).
"""

from __future__ import annotations

import base64
import json
import os
import struct
from typing import Any

FRAME_MAX = 64 * 1024 * 1024  # a frame longer than this is a protocol error


def frame_encode(msg: dict[str, Any]) -> bytes:
    """``msg`` as one frame."""
    data = json.dumps(msg, separators=(",", ":")).encode()
    return struct.pack(">I", len(data)) + data


def frame_send(fd: int, msg: dict[str, Any]) -> None:
    """Write ``msg`` to ``fd`` as one frame (all of it)."""
    view = memoryview(frame_encode(msg))
    while view:
        view = view[os.write(fd, view) :]


def _frame_exact(fd: int, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        chunk = os.read(fd, n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def frame_recv(fd: int) -> dict[str, Any] | None:
    """The next frame on ``fd``, or None at end of stream (or a cut frame)."""
    head = _frame_exact(fd, 4)
    if head is None:
        return None
    (n,) = struct.unpack(">I", head)
    if n > FRAME_MAX:
        raise ValueError(f"frame of {n} bytes is over the {FRAME_MAX} byte limit")
    body = _frame_exact(fd, n)
    if body is None:
        return None
    msg = json.loads(body)
    if not isinstance(msg, dict):
        raise ValueError("a frame must hold a JSON object")
    return msg


def b64(data: bytes) -> str:
    """``data`` as base64 text."""
    return base64.b64encode(data).decode("ascii")


def unb64(text: str) -> bytes:
    """The bytes behind ``b64(text)``."""
    return base64.b64decode(text.encode("ascii"))
