"""Beam's Python job service and an SDK worker pool on loopback, to run curate portably here.

``local_portable()`` starts two processes: ``local_job_service_main`` (the job API a Flink,
Spark or Dataflow job server also speaks) and ``worker_pool_main`` (it starts a separate SDK
worker process for every worker the job service asks for, ``--environment_type=EXTERNAL``).
The pipeline then crosses every boundary a cluster has: it is pickled by the driver, sent over
the job API, and run in other processes that unpickle it. Used by the portable-runner tests
and ``benchmarks/runners.py``; ``docs/runners.md`` shows the same by hand.

The worker pool starts workers as ``python`` from ``PATH``: the interpreter given here is put
first on the ``PATH`` of both processes, and they inherit the environment (``PYTHONPATH``).
Clients connect over loopback, but Beam's worker pool listens on every interface (not
configurable there): use it on a trusted host only. What it does NOT do: ship the package
anywhere (workers import it from this machine), or outlive the ``with`` block (both process
groups are ended).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class PortableEndpoints:
    """Where the job service and the worker pool listen, and their log files."""

    job_endpoint: str
    worker_pool: str
    logs: tuple[Path, ...]

    def beam_args(self) -> list[str]:
        """The pipeline options that send a job here with separate SDK worker processes."""
        return [
            "--runner=PortableRunner",
            f"--job_endpoint={self.job_endpoint}",
            "--environment_type=EXTERNAL",
            f"--environment_config={self.worker_pool}",
        ]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_listening(port: int, proc: subprocess.Popen[bytes], log: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"{proc.args!r} exited with {proc.returncode}:\n{tail}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
            return
        time.sleep(0.2)
    raise TimeoutError(f"nothing listened on port {port} within {timeout_s:.0f} s; see {log}")


def _start(argv: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """End the process group this module started (the pool's SDK workers are in it)."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    with contextlib.suppress(ProcessLookupError):  # workers left after the pool itself ended
        os.killpg(proc.pid, signal.SIGKILL)


@contextlib.contextmanager
def local_portable(
    python: str = sys.executable, timeout_s: float = 120.0
) -> Iterator[PortableEndpoints]:
    """Run a job service and a worker pool for the ``with`` block; yield their endpoints."""
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(python) + os.pathsep + env.get("PATH", "")
    with tempfile.TemporaryDirectory(prefix="tasksieve-portable-") as tmp:
        root = Path(tmp)
        job_port, pool_port = free_port(), free_port()
        logs = (root / "job_service.log", root / "worker_pool.log")
        procs: list[subprocess.Popen[bytes]] = []
        try:
            procs.append(
                _start(
                    [
                        python,
                        "-m",
                        "apache_beam.runners.worker.worker_pool_main",
                        f"--service_port={pool_port}",
                    ],
                    logs[1],
                    env,
                )
            )
            procs.append(
                _start(
                    [
                        python,
                        "-m",
                        "apache_beam.runners.portability.local_job_service_main",
                        f"--port={job_port}",
                        f"--staging_dir={root / 'staging'}",
                    ],
                    logs[0],
                    env,
                )
            )
            _wait_listening(pool_port, procs[0], logs[1], timeout_s)
            _wait_listening(job_port, procs[1], logs[0], timeout_s)
            yield PortableEndpoints(f"localhost:{job_port}", f"localhost:{pool_port}", logs)
        finally:
            for proc in reversed(procs):
                _stop(proc)
