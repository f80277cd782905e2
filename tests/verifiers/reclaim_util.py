"""Helpers for the reclamation tests: find a run's processes by a marker in their argv.

Each test run execs ``python -I -c CODE MARKER`` (never the warm path), so the marker is in
the argv of the run and of every process it forks. ``cleanup`` SIGKILLs only processes
carrying a marker the test made, so a failing test leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from tasksieve.verifiers.sandbox.process.sandbox import ProcessSandbox

REPO = Path(__file__).resolve().parents[2]
KINDS = {  # the process sandbox's executors and isolation methods
    "forkserver": {},
    "per-run": {"warm": False},
    "unshare": {"isolation": "unshare"},
}

FORK_BOMB = (
    "import os, time\n"
    "while True:\n"
    " try:\n"
    "  if os.fork() == 0:\n"
    "   while True: pass\n"
    " except OSError: time.sleep(0.01)\n"
)
SPIN_WITH_CHILDREN = (
    "import os\n"
    "for i in range(3):\n"
    " if os.fork() == 0:\n"
    "  if i == 0: os.setsid()\n"
    "  break\n"
    "while True: pass\n"
)
SLEEPERS_THEN = (  # forked sleepers (one in its own session), then {end}
    "import os, time\n"
    "for i in range(3):\n"
    " if os.fork() == 0:\n"
    "  if i == 0: os.setsid()\n"
    "  time.sleep(300); os._exit(0)\n"
    "{end}\n"
)


def marker() -> str:
    """A fresh marker for one test's runs."""
    return "reclaim-" + uuid.uuid4().hex


def command(sb: ProcessSandbox, code: str, mark: str) -> list[str]:
    """``python -I -c code mark``: not warm-eligible, so exec'd with the marker in argv."""
    return [sb.python, "-I", "-c", code, mark]


def marked(mark: str) -> list[int]:
    """Pids of live (not zombie) processes with ``mark`` in their argv."""
    found = []
    needle = mark.encode()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                if needle not in fh.read():
                    continue
            with open(f"/proc/{pid}/stat", "rb") as fh:
                if fh.read().rsplit(b")", 1)[1].split()[0] != b"Z":
                    found.append(int(pid))
    return found


def survivors(mark: str, within: float) -> list[int]:
    """``marked(mark)`` once it is empty, or when ``within`` seconds have passed."""
    end = time.monotonic() + within
    while (found := marked(mark)) and time.monotonic() < end:
        time.sleep(0.05)
    return found


def at_least(mark: str, n: int, within: float) -> list[int]:
    """``marked(mark)`` once it holds ``n`` pids, or when ``within`` seconds have passed.

    Runs start asynchronously: without a warm fork server each one sets up its namespaces
    and starts an interpreter first, which on a busy machine takes well over a second.
    """
    end = time.monotonic() + within
    while len(found := marked(mark)) < n and time.monotonic() < end:
        time.sleep(0.05)
    return found


def cleanup(marks: list[str]) -> None:
    """SIGKILL every process carrying one of ``marks`` (what a failed test left running)."""
    for mark in marks:
        for pid in marked(mark):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


@contextlib.contextmanager
def marks() -> Iterator[list[str]]:
    """A list to append markers to; their processes are killed on the way out."""
    made: list[str] = []
    try:
        yield made
    finally:
        cleanup(made)


def descendants(pid: int) -> list[int]:
    """Every live descendant of ``pid`` (via /proc/PID/task/*/children)."""
    out: list[int] = []
    todo = [pid]
    while todo:
        p = todo.pop()
        with contextlib.suppress(OSError):
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as fh:
                    kids = [int(k) for k in fh.read().split()]
                out += kids
                todo += kids
    return out


def alive(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


def still_alive(pids: list[int], within: float) -> list[int]:
    """Those of ``pids`` alive once none is, or when ``within`` seconds have passed."""
    end = time.monotonic() + within
    while (found := [p for p in pids if alive(p)]) and time.monotonic() < end:
        time.sleep(0.05)
    return found


@contextlib.contextmanager
def host_process(code: str, mark: str, cwd: Path) -> Iterator[bytes]:
    """Run ``python -c code mark`` as a host (this checkout importable) and yield the first
    line it prints; the host is SIGKILLed on the way out, however the block ends."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    host = subprocess.Popen(
        [sys.executable, "-c", code, mark], stdout=subprocess.PIPE, env=env, cwd=cwd
    )
    try:
        assert host.stdout is not None
        yield host.stdout.readline()
    finally:
        host.kill()
        host.wait(30.0)
