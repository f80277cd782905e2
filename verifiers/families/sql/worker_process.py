"""The SQL verifier's sandboxed DuckDB worker processes: start one, send a request, read the answer.

A ``Worker`` is one long-lived ``sql_worker.py`` process started with the sandbox's
``spawn()`` (the DuckDB extension module shipped into its scratch dir), talking one JSON line
per request on its stdin and stdout. It reports ``{"ready": true}`` once started; each
request gets a ``setup`` line (and a ``query`` line when the setup went through) within the
request's time budget plus a grace. A worker that dies, breaks the protocol or misses its
deadline raises ``WorkerGone`` (with the phase, whether it timed out and the limit its exit
status shows) and is dead afterwards. Workers are started from one long-lived thread, since
bwrap's ``--die-with-parent`` fires when the *thread* that started it exits.

It does NOT restart a worker (the verifier and the differ drop and replace one) nor bound its
memory beyond the sandbox's limits.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import shutil
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tasksieve.verifiers.families.sql.guest import worker as sql_worker
from tasksieve.verifiers.sandbox.base import Limits, SpawnedRun
from tasksieve.verifiers.sandbox.pipes import Pump
from tasksieve.verifiers.sandbox.support import limit_from

WORKER_SOURCE = Path(sql_worker.__file__).read_text(encoding="utf-8")
MAX_REQUESTS = 2000
_WORKER_CPU_S = 3600
_START_S = 60.0
_GRACE_S = 3.0
_MAX_LINE = 64_000_000
# bwrap's --die-with-parent fires when the *thread* that started it exits, so workers that
# outlive one verify() call are started from this one long-lived thread.
_SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sql-worker-spawn")


class WorkerGone(Exception):
    """The worker died, broke the protocol or missed its deadline."""

    def __init__(self, phase: str, timed_out: bool, limit: str | None, tail: str) -> None:
        super().__init__(f"worker gone in {phase}")
        self.phase, self.timed_out, self.limit, self.tail = phase, timed_out, limit, tail


def duckdb_module_path() -> Path:
    """Where the ``_duckdb`` extension module lives (shipped into each worker's sandbox)."""
    spec = importlib.util.find_spec("_duckdb")
    if spec is None or not spec.origin:
        raise ImportError("the SQL verifier needs duckdb: pip install duckdb")
    return Path(spec.origin)


class Worker:
    """One sandboxed ``sql_worker.py`` process and its pipes."""

    def __init__(self, sandbox: Any, python: str, memory_mb: int) -> None:
        so = duckdb_module_path()
        files: dict[str, bytes | str] = {
            "sql_worker.py": WORKER_SOURCE,
            f"lib/{so.name}": so.read_bytes(),
        }
        limits = Limits(
            wall_s=_START_S,
            cpu_s=_WORKER_CPU_S,
            memory_mb=memory_mb,
            max_processes=64,
            max_file_bytes=256_000_000,
            scratch_mb=512,
        )
        self.memory_mb = memory_mb
        env = shutil.which("env", path="/usr/bin:/bin")  # few malloc arenas: a small address space
        pre = [env, "MALLOC_ARENA_MAX=2"] if env else []
        cmd = [*pre, python, "-I", "-S", "sql_worker.py"]
        self.proc: SpawnedRun = _SPAWNER.submit(sandbox.spawn, files, cmd, limits).result()
        self.requests, self.cpu_s = 0, 0.0
        self.pump = Pump()
        p = self.proc.popen
        assert p.stdout and p.stderr and p.stdin
        self.out = self.pump.add_reader(p.stdout.fileno(), _MAX_LINE)
        self.err = self.pump.add_reader(p.stderr.fileno(), 16384)
        try:
            ready = self._line("start", time.monotonic() + _START_S)
        except WorkerGone as e:
            self.close()
            raise RuntimeError(f"SQL worker did not start: {e.tail or 'no output'}") from e
        if not ready.get("ready"):
            self.close()
            raise RuntimeError(f"SQL worker sent {str(ready)[:200]} instead of ready")
        self.cpu_s = float(ready.get("cpu_s", 0.0))
        self.last_cpu_s: float | None = None  # the CPU seconds of the last answered request

    def _line(self, phase: str, deadline: float) -> dict[str, Any]:
        while True:
            raw = self.out.take_line()
            if raw is not None:
                try:
                    obj = json.loads(raw)
                except ValueError:
                    obj = None
                if isinstance(obj, dict):
                    return obj
                self.err.buf += b"\nbad line: " + raw[:200]
                raise self._gone(phase, False)
            if self.out.eof or self.out.overflow:
                raise self._gone(phase, False)
            left = deadline - time.monotonic()
            if left <= 0:
                raise self._gone(phase, True)
            self.pump.poll(min(left, 0.25))

    def _gone(self, phase: str, timed_out: bool) -> WorkerGone:
        if self.out.eof:  # exiting on its own: let it, so its status tells why
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.popen.wait(timeout=1.0)
        self.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.popen.wait(timeout=2.0)
        code = self.proc.popen.returncode
        stderr = bytes(self.err.buf)
        limit = None if code is None else limit_from(code if code >= 0 else 128 - code, stderr)
        tail = stderr.decode("utf-8", errors="replace").strip()[-300:]
        return WorkerGone(phase, timed_out, limit, f"exit code {code}: {tail}")

    def request(self, req: dict[str, Any]) -> dict[str, Any]:
        """Send one request; the reply, or WorkerGone (the worker is then dead)."""
        assert self.proc.popen.stdin
        self.requests += 1
        self.pump.write(self.proc.popen.stdin.fileno(), (json.dumps(req) + "\n").encode())
        budget = float(req["timeout_s"]) + _GRACE_S
        msg = self._line("setup", time.monotonic() + budget)
        if msg.get("phase") == "query":
            msg = self._line("query", time.monotonic() + budget)
        before, self.cpu_s = self.cpu_s, float(msg.get("cpu_s", 0.0))
        self.last_cpu_s = self.cpu_s - before if "cpu_s" in msg else None
        return msg

    def healthy(self) -> bool:
        """Whether this worker may take another request."""
        return (
            self.proc.popen.poll() is None
            and self.requests < MAX_REQUESTS
            and self.cpu_s < _WORKER_CPU_S / 2
        )

    def close(self) -> None:
        """Kill the sandbox and release the pipes."""
        self.pump.close()
        self.proc.close()
