"""Workspaces of the process sandbox: a live shell over a copy-on-write snapshot.

Each behaviour runs with bubblewrap and with the ``unshare`` fallback (the ``box`` fixture):
shell state persists, a command's wall time, the session's idle time and lifetime end what
they should, the disk quota and the process limit hold, nothing is written outside the
workspace, ``diff`` reports edits, and nothing of a session outlives ``close``.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from tasksieve.verifiers.sandbox.process.sandbox import ProcessSandbox
from tasksieve.verifiers.sandbox.workspace import SessionLimits, WorkspaceError, WorkspaceSpec
from tests.verifiers.sandbox.conftest import our_mounts


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def _host_pids_running(token: bytes) -> list[int]:
    """Host pids whose command line holds ``token`` (argv joined by NUL)."""
    found = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if token in (p / "cmdline").read_bytes():
                    found.append(int(p.name))
            except OSError:
                continue
    return found


def test_shell_keeps_cwd_variables_and_background_jobs(box: ProcessSandbox, snapshot: Path) -> None:
    with box.open_workspace(WorkspaceSpec(str(snapshot), env_vars={"GREETING": "hi"})) as ws:
        assert ws.exec("cd pkg && export ANSWER=42 && sleep 127 &").exit_code == 0
        assert ws.exec("cd pkg; export ANSWER=42; X=local").exit_code == 0
        r = ws.exec('echo "$PWD $ANSWER $X $GREETING"; jobs | grep -c "sleep 127"')
        assert r.stdout.decode().split() == ["/workspace/pkg", "42", "local", "hi", "1"]
        assert r.exit_code == 0 and r.ended is None
        fresh = ws.run(["sh", "-c", 'echo "$PWD ${ANSWER:-unset}"'])
        assert fresh.stdout == b"/workspace unset\n"
        assert ws.exec("exit 3").exit_code == 3  # the shell died: a new one takes over
        again = ws.exec("echo $PWD")
        assert again.stdout == b"/workspace/pkg\n" and b"new one starts" in again.stderr
        assert ws.exec("kill -9 $$").exit_code == 137  # hostile: the shell kills itself
        assert ws.exec("echo $((6 * 7))").stdout == b"42\n" and ws.alive
    assert not ws.alive
    assert ws.exec("true").ended == "session"


def test_command_wall_time_restarts_the_shell_only(box: ProcessSandbox, snapshot: Path) -> None:
    with box.open_workspace(WorkspaceSpec(str(snapshot))) as ws:
        ws.exec("cd pkg; sleep 128 &")
        t0 = time.monotonic()
        r = ws.exec("echo started; sleep 60", timeout_s=1.0)
        assert r.ended == "wall" and r.exit_code is None and r.stdout == b"started\n"
        assert time.monotonic() - t0 < 5
        after = ws.exec("echo $PWD; pgrep -c -f 'sleep 128'")
        assert after.stdout.split() == [b"/workspace/pkg", b"1"], after
        loud = ws.exec("yes", timeout_s=10)
        assert loud.ended == "output" and loud.truncated
        assert len(loud.stdout) <= ws.spec.limits.max_output_bytes


def test_idle_timeout_and_lifetime_end_the_session(box: ProcessSandbox, snapshot: Path) -> None:
    idle = box.open_workspace(WorkspaceSpec(str(snapshot), limits=SessionLimits(idle_s=0.5)))
    life = box.open_workspace(
        WorkspaceSpec(str(snapshot), limits=SessionLimits(lifetime_s=2.0, command_wall_s=30))
    )
    try:
        t0 = time.monotonic()
        r = life.exec("sleep 30")
        assert r.ended == "session" and time.monotonic() - t0 < 8
        assert life.exec("true").ended == "session"
        deadline = time.monotonic() + 5
        while idle.alive and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not idle.alive and idle.exec("true").ended == "session"
    finally:
        idle.close()
        life.close()


def test_disk_quota_and_process_limit(box: ProcessSandbox, snapshot: Path) -> None:
    limits = SessionLimits(disk_mb=4, max_processes=24, command_wall_s=10)
    before = _tree(snapshot)
    with box.open_workspace(WorkspaceSpec(str(snapshot), limits=limits)) as ws:
        full = ws.exec(
            "head -c 8000000 /dev/zero > big; echo rc=$?; head -c 9000000 /dev/zero > /tmp/t"
        )
        assert b"rc=1" in full.stdout and b"No space left" in full.stderr, full
        bomb = ws.exec("b() { b | b & }; b; sleep 2; echo survived", timeout_s=4)
        assert bomb.ended in (None, "wall")
        assert ws.exec("echo ok", timeout_s=10).stdout == b"ok\n"
    assert _tree(snapshot) == before
    assert os.statvfs(str(snapshot)).f_bavail > 0


def test_nothing_is_written_outside_the_workspace(box: ProcessSandbox, snapshot: Path) -> None:
    before = _tree(snapshot)
    with box.open_workspace(WorkspaceSpec(str(snapshot))) as ws:
        for target in ("/snapshot/README", "/snapshot/new", "/usr/planted", "/etc/planted"):
            r = ws.exec(f"echo x > {target}")
            assert r.exit_code != 0, target
        ws.exec("ln -s /etc etc-link; ln -s /etc/hostname host-link")
        for bad in ("../escape", "/etc/passwd", "pkg/../../x", "etc-link/planted", "host-link"):
            with pytest.raises(ValueError):
                ws.write_file(bad, b"x")
        with pytest.raises(ValueError):
            ws.read_file("host-link")
        assert ws.read_file("missing.txt") is None
        ws.write_file("deep/new/file.txt", b"made by the host\n")
        r = ws.exec("cat deep/new/file.txt && echo more >> deep/new/file.txt && ls -ld deep")
        assert r.exit_code == 0 and r.stdout.startswith(b"made by the host"), r
        assert ws.read_file("deep/new/file.txt") == b"made by the host\nmore\n"
    assert _tree(snapshot) == before


def test_diff_shows_edits_new_and_deleted_files(box: ProcessSandbox, snapshot: Path) -> None:
    with box.open_workspace(WorkspaceSpec(str(snapshot))) as ws:
        ws.exec("sed -i 's/return 1/return 2/' pkg/mod.py && rm -r old README")
        ws.exec("printf 'no newline' > notes.txt && printf '\\0\\1x' > data.bin")
        ws.exec("chmod +x pkg/__init__.py")
        diff = ws.diff()
    assert "--- a/pkg/mod.py\n+++ b/pkg/mod.py\n" in diff
    assert "-    return 1\n+    return 2\n" in diff
    assert "diff --git a/README b/README\ndeleted file mode 100644\n" in diff
    assert "--- a/old/gone.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n" in diff
    assert "+++ b/notes.txt\n@@ -0,0 +1 @@\n+no newline\n\\ No newline at end of file\n" in diff
    assert "Binary files a/data.bin and b/data.bin differ\n" in diff
    assert "__init__" not in diff  # a mode change alone is not a content change


def test_close_kills_what_the_session_left_running(box: ProcessSandbox, snapshot: Path) -> None:
    token = f"{os.getpid() % 1000 + 9000}"
    ws = box.open_workspace(WorkspaceSpec(str(snapshot)))
    ws.exec(f"setsid nohup sleep {token} >/dev/null 2>&1 & (sleep {token} &) ; true")
    deadline = time.monotonic() + 5
    while len(_host_pids_running(f"sleep\0{token}".encode())) < 2:
        assert time.monotonic() < deadline, "the two sleeps did not start"
        time.sleep(0.05)
    assert our_mounts(snapshot) == []  # the session's mounts live in its own namespace
    ws.close()
    ws.close()
    assert _host_pids_running(f"sleep\0{token}".encode()) == []


def test_bad_snapshot_is_a_clear_error(box: ProcessSandbox, tmp_path: Path) -> None:
    with pytest.raises(WorkspaceError, match="not a directory"):
        box.open_workspace(WorkspaceSpec(str(tmp_path / "missing")))


def test_memory_summed_over_a_session_is_bounded(box: ProcessSandbox, snapshot: Path) -> None:
    """Four processes of 120 MB each under a 200 MB session: the session's cgroup stops some
    (each alone is within its rlimit), and the session itself survives."""
    if not str(box.describe()["workspace_cgroup"]).startswith("cgroup"):
        pytest.skip(f"no cgroup for sessions here: {box.describe()['workspace_cgroup']}")
    limits = SessionLimits(memory_mb=200, command_wall_s=30)
    hog = 'python3 -c "b = bytearray(120 << 20); import time; time.sleep(2)"'
    with box.open_workspace(WorkspaceSpec(str(snapshot), limits=limits)) as ws:
        r = ws.exec(f"for i in 1 2 3 4; do {hog} & done; wait")
        assert r.stderr.count(b"Killed") >= 1, r
        assert ws.exec("echo alive").stdout == b"alive\n"


def test_prestarted_sessions_are_fresh(box: ProcessSandbox, snapshot: Path) -> None:
    spec = WorkspaceSpec(str(snapshot), limits=SessionLimits(lifetime_s=61))
    pool = box.prewarm_workspaces(spec, size=2)
    assert pool.wait_ready(60), pool.error
    first = box.open_workspace(spec)
    first.exec("echo changed > README; cd pkg")
    first.close()
    t0 = time.monotonic()
    second = box.open_workspace(spec)  # from the pool: nothing to start
    assert time.monotonic() - t0 < 0.5
    try:
        assert second.read_file("README") == b"a small repository\n"
        assert second.exec("pwd").stdout == b"/workspace\n"
    finally:
        second.close()


def test_the_guest_is_sent_compiled_only_to_this_interpreter() -> None:
    """marshal's format is the interpreter's own: another interpreter gets the source."""
    import marshal
    import sys

    from tasksieve.verifiers.sandbox.process import workspace as wsmod

    code = wsmod._compiled_guest(sys.executable)
    assert code is not None and marshal.loads(code).co_filename == "wsinit"
    assert wsmod._compiled_guest("/bin/sh") is None


SPIN = "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done"  # a fixed amount of shell work


def test_commands_report_the_sessions_cpu_seconds(box: ProcessSandbox, snapshot: Path) -> None:
    """A command's ``cpu_s`` is what the session's processes used since the last command: a
    busy loop shows, a sleep does not, and a background job's time lands in the next one."""
    with box.open_workspace(WorkspaceSpec(str(snapshot))) as ws:
        busy = ws.exec(SPIN)
        idle = ws.exec("sleep 0.3")
        fresh = ws.run(["sh", "-c", SPIN])
        assert ws.exec(f"({SPIN}; touch /tmp/done) > /dev/null 2>&1 &").exit_code == 0
        ws.exec("while [ ! -e /tmp/done ]; do sleep 0.05; done; sleep 0.1")
        after = ws.exec("true")
    for r in (busy, idle, fresh, after):
        assert r.cpu_s is not None and r.exit_code == 0, r
    assert busy.cpu_s is not None and busy.cpu_s >= 0.03, busy
    assert fresh.cpu_s is not None and fresh.cpu_s >= 0.03, fresh
    assert idle.cpu_s is not None and idle.cpu_s < busy.cpu_s / 2, (idle, busy)
    assert after.cpu_s is not None and after.cpu_s < busy.cpu_s / 2, after  # counted before


def test_the_sessions_python_sees_what_the_tests_see(box: ProcessSandbox, snapshot: Path) -> None:
    """The interpreter a virtualenv is built on keeps its own site-packages (packages, ``.pth``
    start-up hooks) out of a session: they show as empty read-only dirs, the standard library
    and the task's paths stay."""
    import sys

    from tasksieve.verifiers.sandbox.process.binds import base_site_dirs

    hidden = base_site_dirs(box._plan)
    if sys.prefix == sys.base_prefix:
        assert hidden == []
        pytest.skip("not in a virtualenv: the interpreter's site-packages are the project's")
    assert hidden and any(os.listdir(d) for d in hidden)  # the host's are not empty
    probe = (
        "import json, os\n"
        f"dirs = {hidden!r}\n"
        "print(json.dumps([os.listdir(d) for d in dirs if os.path.isdir(d)]))\n"
    )
    spec = WorkspaceSpec(str(snapshot), env_vars={"PYTHONPATH": "/workspace/pkg"})
    with box.open_workspace(spec) as ws:
        r = ws.run([box.python, "-c", probe])
        assert r.exit_code == 0, r
        assert r.stdout.decode().strip() == json.dumps([[] for _ in hidden]), r
        planted = ws.exec(f"touch {hidden[0]}/planted.pth")
        assert planted.exit_code != 0 and b"Read-only" in planted.stderr, planted
        tests_view = ws.exec(f"cd pkg && {box.python} -c 'import mod, email.parser'")
        assert tests_view.exit_code == 0, tests_view
