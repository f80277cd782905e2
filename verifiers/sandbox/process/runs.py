"""A started run of the ``process`` sandbox, and the supervision of one ``run()`` call.

``supervise`` enforces the wall clock and the output caps from the host side and kills the
whole run (with namespaces: the whole pid namespace) before it returns, and reports the CPU
time the run's processes used (``SandboxProcess.cpu_s``). It does NOT bound CPU or memory
itself: the run's rlimits and namespaces do.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from tasksieve.verifiers.sandbox.base import Execution, Limits
from tasksieve.verifiers.sandbox.pipes import Pump, drain_until
from tasksieve.verifiers.sandbox.process.binds import infra_error
from tasksieve.verifiers.sandbox.process.forkserver import JOB_ENV, ForkedProcess
from tasksieve.verifiers.sandbox.process.reap import inits_of, wait_gone
from tasksieve.verifiers.sandbox.process.uids import UIDS
from tasksieve.verifiers.sandbox.support import limit_from, parse_frames, read_nofollow

WORKDIR = JOB_ENV["HOME"]
PATH = JOB_ENV["PATH"]


def warm_job(command: list[str], limits: Limits) -> dict[str, Any]:
    """The fork server's description of one job: argv, environment and rlimits."""
    mem = limits.memory_mb * 1024 * 1024
    cpu = max(1, math.ceil(limits.cpu_s))
    return {
        "argv": list(command),
        "env": dict(JOB_ENV),
        "rlimits": {
            "RLIMIT_AS": [mem, mem],
            "RLIMIT_CPU": [cpu, cpu + 1],
            "RLIMIT_NPROC": [limits.max_processes] * 2,
            "RLIMIT_FSIZE": [limits.max_file_bytes] * 2,
            "RLIMIT_CORE": [0, 0],
        },
    }


@dataclass
class SandboxProcess:
    """A started sandboxed command: its pipes, and how to kill and clean it up."""

    popen: subprocess.Popen[bytes]
    started: float
    collect_fd: int | None = None
    scratch: str | None = None
    namespaced: bool = True
    uid: int | None = None
    init_fd: int | None = None  # a pidfd of the namespace's init, when the launcher said
    init_known: bool = False  # the launcher reported its init (or that it made none)
    _fds: list[int] = field(default_factory=list)
    _inits: list[int] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def cpu_s(self) -> float | None:
        """CPU seconds of every process of the run, once it ended; None where not measured.

        A fork-server run: the server's measure (``ForkedProcess.cpu_s``). A run started here
        through a launcher (bwrap, unshare) is None: bubblewrap reports its init's exit over
        an event fd and exits without reaping it, so the init's time (and that of every
        process it reaped) goes to the host's reaper, not to anything this process can read;
        weak mode (no pid namespace) lets processes escape the run altogether.
        """
        if isinstance(self.popen, ForkedProcess):
            return self.popen.cpu_s
        return None

    def kill(self) -> None:
        """Kill the whole sandbox (``close`` then waits until its pid namespace is empty).

        The launcher (bwrap, unshare) is a child of this host process, the namespace's init a
        child of the launcher: its pidfd is taken before the kill, ``close`` waits on it.
        Without namespaces (weak mode) only the process group is killed.
        """
        self._inits += self._signal()

    def _signal(self) -> list[int]:
        with self._lock:  # close() and the sandbox's close() may race from two threads
            return self._signal_locked()

    def _signal_locked(self) -> list[int]:
        if isinstance(self.popen, ForkedProcess):
            self.popen.kill()
            return []
        alive = self.popen.returncode is None and self.namespaced
        if self.init_fd is not None:  # bwrap reported its init at spawn (--info-fd)
            inits = [os.dup(self.init_fd)]  # each waiter closes its own copy
        elif self.init_known:
            inits = []
        else:
            inits = inits_of(self.popen.pid) if alive else []
        for fd in inits:  # the init itself, not only via its parent-death signal
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(fd, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.popen.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            self.popen.kill()
        return inits

    def reclaim(self) -> None:
        """Kill the run and wait until it is gone, leaving its pipes to the owner's thread."""
        self._release(wait_gone(self._signal(), 30.0))

    def _release(self, gone: bool) -> None:
        """Give the run's uid back, only when its namespace is known to be empty."""
        with self._lock:
            if self.uid is not None and gone:
                UIDS.give(self.uid)
                self.uid = None

    def close(self) -> None:
        """Kill what is left, wait until none of it exists (30 s at most), clean up."""
        self.kill()
        gone = wait_gone(self._inits, 30.0)
        self._inits = []
        with contextlib.suppress(subprocess.TimeoutExpired):  # a launcher or server stuck
            self.popen.wait(timeout=30.0)
        self._release(gone and self.popen.returncode is not None)
        with self._lock:
            if self.init_fd is not None:
                os.close(self.init_fd)
                self.init_fd = None
        for f in (self.popen.stdin, self.popen.stdout, self.popen.stderr):
            if f is not None:
                with contextlib.suppress(OSError):
                    f.close()
        for fd in self._fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        if self.collect_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.collect_fd)
        if self.scratch:
            shutil.rmtree(self.scratch, ignore_errors=True)


def supervise(
    proc: SandboxProcess,
    limits: Limits,
    stdin: bytes,
    collect: tuple[str, ...],
    t0: float,
    method: str,
) -> Execution:
    """Feed stdin, read output under the caps and the wall limit, then kill and reap the run."""
    p = proc.popen
    assert p.stdin and p.stdout and p.stderr
    pump = Pump()
    out = pump.add_reader(p.stdout.fileno(), limits.max_output_bytes)
    err = pump.add_reader(p.stderr.fileno(), limits.max_output_bytes)
    col_cap = (limits.max_file_bytes + 512) * max(1, len(collect))
    col = pump.add_reader(proc.collect_fd, col_cap) if proc.collect_fd is not None else None
    stdin_fd = os.dup(p.stdin.fileno())  # the pump owns (and closes) this copy
    p.stdin.close()
    pump.write(stdin_fd, stdin, close_when_done=True)
    deadline = t0 + limits.wall_s
    limit_hit: str | None = None
    readers = [r for r in (out, err, col) if r is not None]
    while True:
        if out.overflow or err.overflow:
            limit_hit = "output"
            break
        if all(r.eof for r in readers):
            break
        if p.poll() is not None:  # exited: a short grace for buffered output
            drain_until(pump, lambda: all(r.eof for r in readers), time.monotonic() + 0.2)
            break
        now = time.monotonic()
        if now >= deadline:
            limit_hit = "wall"
            break
        pump.poll(min(deadline - now, 0.25))
    if limit_hit is None:
        try:
            p.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            limit_hit = "wall"
    proc.kill()
    p.wait()
    pump.close()
    code = p.returncode if p.returncode >= 0 else 128 - p.returncode
    if limit_hit in ("wall", "output"):
        code_out: int | None = None if limit_hit == "wall" else code
    else:
        code_out = code
    files = parse_frames(bytes(col.buf)) if col is not None else {}
    if proc.scratch and collect:
        cap = limits.max_file_bytes
        found = {n: read_nofollow(proc.scratch, n, cap) for n in collect}
        files = {n: d for n, d in found.items() if d is not None}
    stderr = bytes(err.buf)
    if limit_hit is None and code == 128 + signal.SIGKILL and _oom_killed(p):
        limit_hit = "memory"  # the server's cgroup was full (``servercg``), not an rlimit
    return Execution(
        exit_code=code_out,
        stdout=bytes(out.buf),
        stderr=stderr,
        duration_s=time.monotonic() - t0,
        limit_hit=limit_hit or limit_from(code, stderr),
        stdout_truncated=out.overflow,
        stderr_truncated=err.overflow,
        infra_error=getattr(p, "infra_error", None) or infra_error(code, stderr, method),
        files=files,
        cpu_s=proc.cpu_s,
    )


def _oom_killed(p: subprocess.Popen[bytes]) -> bool:
    """Whether the kernel's out-of-memory killer acted in the run's cgroup while it ran."""
    mark = getattr(p, "oom_mark", None)
    if mark is None or mark[1] is None:
        return False
    now = mark[0]()
    return now is not None and now > mark[1]
