"""A local ``transformers serve`` process: an OpenAI-compatible server on a loopback port.

Used by the sampler benchmarks and by the openai sampler's tests. It runs offline (the model
is a local directory; the hub is never contacted) on the CPU, in its own process group.
What it does NOT do: pick a GPU, or check that the port is still free when the server binds.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve_command() -> str | None:
    """The ``transformers`` CLI beside this interpreter, or on PATH (None: not installed)."""
    beside = Path(sys.executable).with_name("transformers")
    return str(beside) if beside.is_file() else shutil.which("transformers")


@dataclass
class ServeProcess:
    """``transformers serve MODEL_DIR`` on 127.0.0.1:port, offline, on the CPU."""

    model_dir: Path
    port: int
    log_path: Path
    threads: int | None = 1  # OMP_NUM_THREADS of the server (None: torch's default)
    extra_args: tuple[str, ...] = ()  # more ``transformers serve`` flags
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 180.0) -> None:
        """Start the server and wait until it answers /health (raises with its log if not)."""
        cli = serve_command()
        if cli is None:
            raise RuntimeError("the transformers CLI is not installed")
        env = {
            **os.environ,
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "HF_HUB_DISABLE_TELEMETRY": "1",
        }
        if self.threads is not None:
            env["OMP_NUM_THREADS"] = str(self.threads)
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            [
                cli,
                "serve",
                str(self.model_dir),
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--device",
                "cpu",
                "--log-level",
                "warning",
                *self.extra_args,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # its own process group: kill() reaches its children
        )
        log.close()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"transformers serve exited: {self.log_tail()}")
            if self.healthy():
                return
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"transformers serve did not come up: {self.log_tail()}")

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/health", timeout=2) as r:
                return bool(r.status == 200)
        except OSError:
            return False

    def kill(self) -> None:
        """SIGKILL the server's process group (no clean shutdown) and reap it."""
        if self.proc is None or self.proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        """Terminate the server (SIGKILL after 15 s)."""
        if self.proc is None or self.proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.kill()

    def restart(self) -> None:
        self.kill()
        self.start()

    def log_tail(self, chars: int = 2000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return "(no log)"
