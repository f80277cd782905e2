"""Helpers of the hostile-client suites: a server with small limits and raw HTTP over a socket.

Raw sockets let a test send headers without the body they announce, or a chunked body that
never ends, and see whether the server answers before reading it (an HTTP client library
would insist on sending the whole body first).
"""

from __future__ import annotations

import socket
from collections.abc import Iterable
from urllib.parse import urlsplit

from tests.service.servers import Server

SESSION_BYTES = 10_000
BODY_BYTES = 65_536
MEMORY_MB = 4_096
FLAGS = (
    "--workers",
    "1",
    "--session-max-bytes",
    str(SESSION_BYTES),
    "--max-body",
    f"verify={BODY_BYTES}",
    "--max-body",
    f"run_code={BODY_BYTES}",
    "--max-body",
    f"session_exec={BODY_BYTES}",
    "--max-memory-mb",
    str(MEMORY_MB),
)


def raw_request(
    server: Server,
    method: str,
    path: str,
    headers: dict[str, str],
    body: Iterable[bytes] = (),
    timeout: float = 10.0,
) -> tuple[int, bytes]:
    """Send ``headers`` then the ``body`` parts (as far as the server lets us) and read the
    answer: (status, body). Raises ``TimeoutError`` when no answer comes in ``timeout``."""
    where = urlsplit(server.url)
    head = f"{method} {path} HTTP/1.1\r\nHost: {where.hostname}\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
    with socket.create_connection((where.hostname, where.port), timeout=timeout) as sock:
        sock.sendall(head.encode())
        for part in body:
            try:
                sock.sendall(part)
            except OSError:  # the server answered and closed: stop sending
                break
        data = b""
        while b"\r\n\r\n" not in data or len(data.partition(b"\r\n\r\n")[2]) < _length(data):
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            data += chunk
    status_line, _, rest = data.partition(b"\r\n")
    if not status_line:
        raise ConnectionError("the server closed the connection without an answer")
    return int(status_line.split()[1]), rest.partition(b"\r\n\r\n")[2]


def _length(data: bytes) -> int:
    head = data.partition(b"\r\n\r\n")[0].lower()
    for line in head.split(b"\r\n"):
        if line.startswith(b"content-length:"):
            return int(line.split(b":")[1])
    return 0


def chunked(parts: Iterable[bytes], end: bool = False) -> Iterable[bytes]:
    """``parts`` in chunked transfer coding (without the final chunk unless ``end``)."""
    for part in parts:
        yield f"{len(part):x}\r\n".encode() + part + b"\r\n"
    if end:
        yield b"0\r\n\r\n"
