"""A cold run whose host is gone before its parent-death signals are armed does not run.

The lifeline's write end is closed here by hand, which is what a run sees of a host killed
while the run was starting (``verifiers/sandbox/process/lifeline.py``): the bubblewrap run's
guard and the ``unshare`` guest find EOF and end the run before the command, exit 137. A
killed host's undertaker ends what holds the lifeline and the pid namespaces it is in.
"""

from __future__ import annotations

import os
import shutil

import pytest

from tasksieve.verifiers.sandbox.base import Limits
from tasksieve.verifiers.sandbox.process import lifeline
from tasksieve.verifiers.sandbox.process.sandbox import ProcessSandbox
from tests.verifiers.reclaim_util import KINDS, at_least, host_process, marker, marks, survivors

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


ORPHANS = """
import os, shutil, subprocess, sys, time
from tasksieve.verifiers.sandbox.process.lifeline import lifeline
mark = sys.argv[1]
fd = lifeline()
# a holder with no parent-death signal, in this pid namespace
plain = [sys.executable, "-I", "-c", "import time; time.sleep(300)", mark]
# a namespace whose init dropped its descriptor and whose child kept it: bubblewrap's init
# before it armed its signal, with the command already running
nested = (
    "import os, sys, time\\n"
    "if os.fork() == 0:\\n time.sleep(300)\\n"
    "os.close(int(sys.argv[1])); time.sleep(300)\\n"
)
user = [] if os.geteuid() == 0 else ["--user", "--map-root-user"]
spaced = [shutil.which("unshare"), *user, "--pid", "--fork", "--",
          sys.executable, "-I", "-c", nested, str(fd), mark]
for argv in (plain, spaced):
    subprocess.Popen(argv, pass_fds=(fd,), start_new_session=True)
print("ready", flush=True)
time.sleep(300)
"""


def test_the_undertaker_ends_what_a_killed_host_left(tmp_path) -> None:
    """Processes with no parent-death signal that hold the lifeline die with the host, and so
    does every process of a pid namespace one of them is in, its init included."""
    if shutil.which("unshare") is None:
        pytest.skip("needs util-linux unshare")
    with marks() as made:
        made.append(mark := marker())
        with host_process(ORPHANS, mark, tmp_path) as first:
            assert first == b"ready\n"
            running = at_least(mark, 4, 30.0)  # unshare, the plain holder, init and its child
        assert len(running) >= 4, running
        assert survivors(mark, 20.0) == []
