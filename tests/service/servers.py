"""Real ``tasksieve serve`` processes on loopback for the service tests, and a tiny client."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "test-token-0123456789"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Server:
    """One server process: its URL, token and log."""

    url: str
    proc: subprocess.Popen[bytes]
    log: Path
    token: str | None

    def headers(self, **extra: str) -> dict[str, str]:
        auth = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        return {**auth, **extra}

    def post(self, path: str, body: dict[str, Any], timeout: float = 60, **headers: str):
        return httpx.post(
            self.url + path, json=body, headers=self.headers(**headers), timeout=timeout
        )

    def get(self, path: str, timeout: float = 30, **headers: str):
        return httpx.get(self.url + path, headers=self.headers(**headers), timeout=timeout)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def start_server(
    log_dir: Path,
    *flags: str,
    token: str | None = TOKEN,
    port: int = 0,
    env_extra: dict[str, str] | None = None,
) -> Server:
    """Start ``tasksieve serve FLAGS`` on a free loopback port and wait for /healthz."""
    port = port or free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT), **(env_extra or {})}
    env.pop("TASKSIEVE_SERVICE_TOKEN", None)
    if token:
        env["TASKSIEVE_SERVICE_TOKEN"] = token
    log = log_dir / f"server-{port}.log"
    argv = [sys.executable, "-m", "tasksieve.pipeline.cli", "serve", "--port", str(port), *flags]
    with open(log, "wb") as fh:
        proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=fh, stderr=subprocess.STDOUT)
    server = Server(f"http://127.0.0.1:{port}", proc, log, token)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited {proc.returncode}: {log.read_text()}")
        try:
            if httpx.get(server.url + "/healthz", timeout=1).status_code == 200:
                return server
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    server.stop(signal.SIGKILL)
    raise RuntimeError(f"server did not come up: {log.read_text()}")
