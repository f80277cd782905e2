"""A fault-injecting proxy in front of a real ``transformers serve`` (benchmarks.local_server).

``FaultProxy`` forwards each HTTP request to it unchanged unless its plan says otherwise for
that request (by arrival index): answer 429 with Retry-After, answer 503, or reset the
connection. A request the
server cannot take (it is down) resets the client's connection, as the server itself would.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length"}


Plan = Callable[[int], str]
"""Action for the request with this arrival index: forward, 429, 503 or reset."""


@dataclass
class Seen:
    """One request the proxy saw."""

    index: int
    action: str
    at: float
    path: str
    outcome: str = ""


@dataclass
class FaultProxy:
    """An HTTP proxy on a free loopback port in front of ``upstream_port``."""

    upstream_port: int
    plan: Plan = lambda i: "forward"
    retry_after: str = "1"
    on_upstream_error: Callable[[int], None] | None = None
    seen: list[Seen] = field(default_factory=list)
    gate: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: ThreadingHTTPServer | None = None

    def __post_init__(self) -> None:
        self.gate.set()

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def start(self) -> FaultProxy:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                proxy.handle(self, b"")

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                proxy.handle(self, self.rfile.read(length))

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def handle(self, h: BaseHTTPRequestHandler, body: bytes) -> None:
        with self._lock:
            index = len(self.seen)
            seen = Seen(index, self.plan(index), time.monotonic(), h.path)
            self.seen.append(seen)
        if seen.action == "429":
            self._reply(h, 429, b'{"error": "rate limited"}', {"Retry-After": self.retry_after})
        elif seen.action == "503":
            self._reply(h, 503, b'{"error": "overloaded"}', {})
        elif seen.action == "reset":
            _reset(h)
        else:
            self.gate.wait()  # held while the server restarts
            seen.outcome = self._forward(h, body, index)

    def _forward(self, h: BaseHTTPRequestHandler, body: bytes, index: int) -> str:
        conn = http.client.HTTPConnection("127.0.0.1", self.upstream_port, timeout=600)
        try:
            headers = {k: v for k, v in h.headers.items() if k.lower() not in HOP_BY_HOP}
            conn.request(h.command, h.path, body=body or None, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
        except OSError as exc:  # refused, reset, or the server died mid-request
            if self.on_upstream_error is not None:  # before the client hears of it
                self.on_upstream_error(index)
            _reset(h)
            return type(exc).__name__
        finally:
            conn.close()
        extra = {k: v for k, v in resp.getheaders() if k.lower() not in HOP_BY_HOP}
        self._reply(h, resp.status, data, extra)
        return "ok"

    @staticmethod
    def _reply(
        h: BaseHTTPRequestHandler, status: int, data: bytes, headers: dict[str, str]
    ) -> None:
        h.send_response(status)
        for k, v in headers.items():
            h.send_header(k, v)
        h.send_header("Content-Length", str(len(data)))
        h.send_header("Connection", "close")
        h.end_headers()
        h.wfile.write(data)


def _reset(h: BaseHTTPRequestHandler) -> None:
    """Close the client's connection with a TCP reset, no response."""
    h.close_connection = True
    with contextlib.suppress(OSError):
        h.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        h.connection.close()


def code_task(tid: str, fn: str, prompt: str, asserts: list[str], ref: str) -> dict[str, Any]:
    """A code task record (asserts style) for the end-to-end sampler runs."""
    return {
        "id": tid,
        "family": "code",
        "prompt": prompt,
        "verifier": {"family": "code", "style": "asserts", "entry_point": fn, "asserts": asserts},
        "reference_solution": ref,
    }
