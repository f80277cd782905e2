"""Sandbox side of a trial deployment: recording stub upstreams, the probe client, and what the
server's process tree holds (listening sockets, processes), read from ``/proc``.

Standard library only; inlined into the harness by ``bundle``.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

BODY_CAP = 65536
_LOCK = threading.Lock()
RECEIVED: list[dict[str, Any]] = []  # every request any stub got, in arrival order


class _Stub(BaseHTTPRequestHandler):
    """Answers every method: records the request, replies with the stub's name."""

    server_version = "stub"
    sys_version = ""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("do_"):
            return self._answer
        raise AttributeError(name)

    def _answer(self) -> None:
        size = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(min(size, BODY_CAP)) if size > 0 else b""
        up = self.server.upstream  # type: ignore[attr-defined]
        with _LOCK:
            RECEIVED.append(
                {
                    "upstream": up["name"],
                    "method": self.command,
                    "path": self.path,
                    "headers": [[k.lower(), v] for k, v in self.headers.items()],
                    "body": body.decode("utf-8", "replace")[:2000],
                }
            )
        out = f"upstream={up['name']}\n".encode()
        self.send_response(int(up.get("status", 200)))
        self.send_header("X-Upstream", up["name"])
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(out)

    def log_message(self, format: str, *args: Any) -> None:
        return None


def start_stubs(upstreams: list[dict[str, Any]]) -> list[ThreadingHTTPServer]:
    """One recording server per upstream on 127.0.0.1, each served by a daemon thread."""
    servers = []
    for up in upstreams:
        srv = ThreadingHTTPServer(("127.0.0.1", int(up["port"])), _Stub)
        srv.daemon_threads = True
        srv.upstream = up  # type: ignore[attr-defined]
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        servers.append(srv)
    return servers


def wait_ready(port: int, alive: Any, listening: Any, settled: Any, timeout_s: float) -> str:
    """Polls a TCP connect: ``ready``, ``exited`` (``alive()`` turned False), ``elsewhere``
    (``listening()`` names addresses, none of them 127.0.0.1:port), ``nowhere`` (``settled()``:
    the server has finished starting, and it listens on nothing) or ``timeout``."""
    start = time.monotonic()
    polls = 0
    while time.monotonic() < start + timeout_s:
        if not alive():
            return "exited"
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return "ready"
        polls += 1
        if polls % 10 == 0 and time.monotonic() - start > 0.3:
            held = listening()
            if held and f"127.0.0.1:{port}" not in held:
                return "elsewhere"
            if not held and settled():
                return "nowhere"
        time.sleep(0.02)
    return "timeout"


def send_probe(port: int, probe: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    """Send one probe; its response (status, headers, body head) and the stubs it reached."""
    with _LOCK:
        RECEIVED.clear()
    out: dict[str, Any] = {"name": probe["name"]}
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout_s)
    try:
        body = probe.get("body", "").encode()
        headers = dict(probe.get("headers", {}))
        conn.request(probe["method"], probe["path"], body=body or None, headers=headers)
        resp = conn.getresponse()
        out["status"] = resp.status
        out["headers"] = [[k.lower(), v] for k, v in resp.getheaders()]
        out["body"] = resp.read(BODY_CAP).decode("utf-8", "replace")
    except (OSError, http.client.HTTPException) as e:
        out["error"] = f"{type(e).__name__}: {e}"[:300]
    finally:
        conn.close()
    with _LOCK:
        out["received"] = list(RECEIVED)
    return out


def _sid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[3])  # state ppid pgrp session
    except (OSError, IndexError, ValueError):
        return None


def tree(session: int | None, skip: set[int]) -> list[int]:
    """The pids in ``session`` (every visible pid when None), less ``skip``."""
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in skip:
            continue
        if session is None or _sid(int(name)) == session:
            pids.append(int(name))
    return sorted(pids)


def exe(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return "?"


def _listening() -> dict[str, str]:
    """Socket inode -> ``addr:port`` for every TCP socket in LISTEN state in this netns."""
    found: dict[str, str] = {}
    for table, v6 in (("/proc/net/tcp", False), ("/proc/net/tcp6", True)):
        with contextlib.suppress(OSError), open(table) as f:
            for line in f.readlines()[1:]:
                parts = line.split()
                if len(parts) > 9 and parts[3] == "0A":
                    found[parts[9]] = _addr(parts[1], v6)
    return found


def _addr(hexaddr: str, v6: bool) -> str:
    host, port = hexaddr.split(":")
    raw = bytes.fromhex(host)
    if v6:
        raw = b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))
        return f"[{socket.inet_ntop(socket.AF_INET6, raw)}]:{int(port, 16)}"
    return f"{socket.inet_ntoa(raw[::-1])}:{int(port, 16)}"


def bound(pids: list[int]) -> list[str]:
    """The listening addresses the processes ``pids`` hold open."""
    listening = _listening()
    out: set[str] = set()
    for pid in pids:
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    target = os.readlink(f"/proc/{pid}/fd/{fd}")
                    if target.startswith("socket:[") and target[8:-1] in listening:
                        out.add(listening[target[8:-1]])
    return sorted(out)
