"""The workspace zygote itself: its death, racing and concurrent opens, hostile sessions.

The behaviours every session must have (shell, limits, quota, diff, close) run against the
zygote in ``test_workspace_process.py`` (its ``box`` fixture); here: a killed zygote takes its
sessions with it and the next open starts a new one, opens racing with closes and many opens at
once leave nothing behind, and a session can neither reach the zygote nor another session.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tasksieve.verifiers.sandbox.process.sandbox import ProcessSandbox
from tasksieve.verifiers.sandbox.workspace import WorkspaceSpec
from tasksieve.verifiers.sandbox.wsclient import GuestSession
from tests.verifiers.sandbox.conftest import our_mounts


@pytest.fixture(scope="module")
def zbox(snapshot: Path) -> Iterator[ProcessSandbox]:
    sb = ProcessSandbox(warm=False, workspace_open="zygote")
    if not str(sb.describe()["workspace_open"]).startswith("zygote"):
        sb.close()
        pytest.skip(f"no workspace zygote here: {sb.describe()['workspace_open']}")
    try:
        yield sb
    finally:
        sb.close()
    assert our_mounts(snapshot) == []


def _zygote_pid(box: ProcessSandbox) -> int:
    pid = box._zygote.pid if box._zygote is not None else None
    assert pid is not None, "no zygote runs"
    return pid


def _descendants(pid: int) -> set[int]:
    """Every live host process below ``pid``."""
    found: set[int] = set()
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            kids = Path(f"/proc/{p}/task/{p}/children").read_text().split()
        except OSError:
            continue
        for k in map(int, kids):
            if k not in found:
                found.add(k)
                todo.append(k)
    return found


def _wait_until(cond: object, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if callable(cond) and cond():
            return True
        time.sleep(0.02)
    return False


def _session_pid(ws: GuestSession) -> int:
    assert ws.host_pid is not None
    return ws.host_pid


def test_sessions_are_forked_and_isolated_like_cold_ones(
    zbox: ProcessSandbox, snapshot: Path
) -> None:
    with zbox.open_workspace(WorkspaceSpec(str(snapshot))) as ws:
        assert ws.describe == "zygote"
        zpid = _zygote_pid(zbox)
        assert _session_pid(ws) in _descendants(zpid)
        r = ws.exec(
            "id -u; cat README; ls /snapshot 2>&1 | wc -l; touch /usr/x 2>&1 | grep -c Read-only;"
            " (exec 3<>/dev/tcp/1.1.1.1/53) 2>&1 | grep -m1 -c unreachable; echo $$"
        )
        uid, readme, snap_entries, ro, net, pid = r.stdout.decode().split("\n")[:6]
        assert int(uid) >= 1000 and readme == "a small repository"
        assert snap_entries == "0" and ro == "1" and net == "1", r
        assert int(pid) > 1  # its own pid namespace: the agent is 1, the shell comes later


def test_a_killed_zygote_takes_its_sessions_and_the_next_open_restarts_it(
    zbox: ProcessSandbox, snapshot: Path
) -> None:
    spec = WorkspaceSpec(str(snapshot))
    a, b = zbox.open_workspace(spec), zbox.open_workspace(spec)
    a.exec("sleep 1234 &")
    zpid = _zygote_pid(zbox)
    inside = _descendants(zpid)
    assert {_session_pid(a), _session_pid(b)} <= inside and len(inside) >= 4
    starts = zbox._zygote.starts if zbox._zygote else 0
    os.kill(zpid, signal.SIGKILL)
    assert _wait_until(lambda: not any(Path(f"/proc/{p}").exists() for p in inside)), inside
    assert a.exec("true").ended == "session" and b.exec("true").ended == "session"
    a.close()
    b.close()
    with zbox.open_workspace(spec) as c:
        assert c.exec("echo again").stdout == b"again\n"
        assert zbox._zygote is not None and zbox._zygote.starts == starts + 1
        assert _zygote_pid(zbox) != zpid


def test_opens_racing_with_closes_and_many_at_once(zbox: ProcessSandbox, snapshot: Path) -> None:
    spec = WorkspaceSpec(str(snapshot))
    errors: list[BaseException] = []
    opened: list[GuestSession] = []
    lock = threading.Lock()

    def churn(n: int) -> None:
        try:
            for _ in range(n):
                ws = zbox.open_workspace(spec)
                closer = threading.Thread(target=ws.close)  # its close races the next open
                closer.start()
                keep = zbox.open_workspace(spec)
                closer.join()
                with lock:
                    opened.append(keep)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=churn, args=(3,)) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    assert len(opened) == 18
    outs = {ws.exec("echo $$ > /tmp/me; id -u").stdout for ws in opened}
    assert len(outs) == 18  # 18 live sessions, each with its own uid
    zpid = _zygote_pid(zbox)
    assert len(_descendants(zpid)) >= 18
    for ws in opened:
        ws.close()
    assert _wait_until(lambda: not _descendants(zpid)), _descendants(zpid)
    fds = os.listdir(f"/proc/{zpid}/fd")
    assert len(fds) <= 8, fds  # the zygote holds no session's pipes or pidfds any more


def test_a_hostile_session_reaches_neither_the_zygote_nor_another_session(
    zbox: ProcessSandbox, snapshot: Path
) -> None:
    spec = WorkspaceSpec(str(snapshot))
    with zbox.open_workspace(spec) as victim, zbox.open_workspace(spec) as hostile:
        victim.exec("echo secret > /tmp/secret; sleep 4321 &")
        zpid, vpid = _zygote_pid(zbox), _session_pid(victim)
        attack = (
            f"kill -9 {zpid} {vpid} 2>&1 | grep -c 'No such process';"  # host pids: not here
            " kill -9 -1; sleep 0.2;"  # everything it may signal: its own session only
            " ls /proc | grep -c '^[0-9]';"
            f" ls -d /proc/{zpid} 2>/dev/null | wc -l;"
            " ls /proc/1/fd 2>&1 | grep -c 'Permission denied';"
            " ls /proc/self/fd | tr '\\n' ' '; echo;"
            " cat /proc/1/environ 2>&1 | grep -c 'Permission denied';"
            " find / -name secret -xdev 2>/dev/null | wc -l"
        )
        r = hostile.exec(attack)
        lines = r.stdout.decode().split("\n")
        assert lines[0] == "2", r  # both host pids unknown in its pid namespace
        assert int(lines[1]) <= 6, r  # a handful of its own processes, nothing else
        assert lines[2] == "0", r  # the zygote's host pid is not in its /proc
        assert lines[3] == "1" and lines[5] == "1", r  # the agent is closed to it
        assert set(lines[4].split()) <= {"0", "1", "2", "3", "255"}, r
        assert lines[6] == "0", r
        tracer = (
            "import ctypes, os\n"
            "libc = ctypes.CDLL(None, use_errno=True)\n"
            "print(libc.ptrace(16, 1, 0, 0), ctypes.get_errno() != 0)\n"  # PTRACE_ATTACH
        )
        r = hostile.run(["python3", "-c", tracer])
        assert r.stdout.split() == [b"-1", b"True"], r
        # the victim and the zygote are untouched
        assert victim.exec("cat /tmp/secret").stdout == b"secret\n"
        assert victim.exec("jobs | wc -l").stdout == b"1\n"
        assert _zygote_pid(zbox) == zpid and hostile.exec("echo ok").stdout == b"ok\n"


def test_a_zygote_that_cannot_start_leaves_sessions_cold(
    snapshot: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sb = ProcessSandbox(warm=False, workspace_open="zygote")
    try:
        if sb._zygote is None:
            pytest.skip(f"no workspace zygote here: {sb.describe()['workspace_open']}")
        sb._zygote.python = "/bin/false"  # exits at once: no ready
        with sb.open_workspace(WorkspaceSpec(str(snapshot))) as ws:
            assert ws.describe == sb.method and ws.exec("echo cold").stdout == b"cold\n"
        assert str(sb.describe()["workspace_open"]).startswith("cold: the zygote failed")
        tries = sb._zygote.tries
        with sb.open_workspace(WorkspaceSpec(str(snapshot))) as ws:  # no new try for 10 s
            assert ws.describe == sb.method and sb._zygote.tries == tries == 1
    finally:
        sb.close()
    monkeypatch.setenv("TASKSIEVE_WORKSPACE_OPEN", "cold")
    cold = ProcessSandbox(warm=False)
    try:
        assert cold.describe()["workspace_open"] == "cold"
    finally:
        cold.close()
    with pytest.raises(ValueError, match="workspace_open must be one of"):
        ProcessSandbox(warm=False, workspace_open="fast")


_HOST = """
import os, sys
from tasksieve.verifiers.sandbox.process.sandbox import ProcessSandbox
from tasksieve.verifiers.sandbox.workspace import WorkspaceSpec
sb = ProcessSandbox(warm=False, workspace_open="zygote")
ws = sb.open_workspace(WorkspaceSpec(sys.argv[1]))
ws.exec("sleep 4322 &")
print(sb._zygote.pid, ws.host_pid, flush=True)
os.kill(os.getpid(), 9)
"""


def test_a_killed_host_takes_the_zygote_and_its_sessions(snapshot: Path) -> None:
    root = Path(__file__).resolve().parents[3]
    env = {**os.environ, "PYTHONPATH": str(root)}
    out = subprocess.run([sys.executable, "-c", _HOST, str(snapshot)], capture_output=True,
                         env=env, timeout=120).stdout.split()  # fmt: skip
    if len(out) != 2:
        pytest.skip("no workspace zygote here")
    zpid, agent = map(int, out)
    gone = _wait_until(lambda: not any(Path(f"/proc/{p}").exists() for p in (zpid, agent)))
    assert gone, "the zygote or its session outlived the host"
