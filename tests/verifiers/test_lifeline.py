"""A cold run whose host is gone before its parent-death signals are armed does not run.

The lifeline's write end is closed here by hand, which is what a run sees of a host killed
while the run was starting (``verifiers/sandbox/process/lifeline.py``): the bubblewrap run's
guard and the ``unshare`` guest find EOF and end the run before the command, exit 137.
"""

from __future__ import annotations

import os

import pytest

from tasksieve.verifiers.sandbox.base import Limits
from tasksieve.verifiers.sandbox.process import lifeline
from tasksieve.verifiers.sandbox.process.sandbox import ProcessSandbox
from tests.verifiers.reclaim_util import KINDS

COLD = {name: KINDS[name] for name in ("per-run", "unshare")}
LIMITS = Limits(wall_s=20, cpu_s=10)


def kill_the_lifeline(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process's lifeline as a dead host's: its write end closed."""
    read, write = os.pipe2(os.O_CLOEXEC)
    os.close(write)
    monkeypatch.setattr(lifeline, "_PIPE", [read])


@pytest.mark.parametrize("kind", list(COLD))
def test_a_run_of_a_dead_host_never_starts(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    sb = ProcessSandbox(**COLD[kind])
    try:
        assert sb.run({}, [sb.python, "-I", "-c", "pass"], LIMITS).exit_code == 0  # probed
        kill_the_lifeline(monkeypatch)
        ex = sb.run({}, [sb.python, "-I", "-c", "print('RAN')"], LIMITS)
    finally:
        sb.close()
    assert b"RAN" not in ex.stdout
    assert ex.exit_code == 137, ex


@pytest.mark.parametrize("kind", list(COLD))
def test_a_live_host_runs_as_before(kind: str) -> None:
    sb = ProcessSandbox(**COLD[kind])
    try:
        ex = sb.run({}, [sb.python, "-I", "-c", "print('RAN')"], LIMITS)
    finally:
        sb.close()
    assert ex.stdout == b"RAN\n" and ex.exit_code == 0, ex
