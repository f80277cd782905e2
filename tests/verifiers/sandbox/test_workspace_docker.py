"""Workspaces of the docker backend: a container per session, one attached stream.

Skipped when no Docker engine answers or the sandbox image is missing (build it with
``tasksieve sandbox build-image``).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tasksieve.verifiers.sandbox.docker.image import image_name
from tasksieve.verifiers.sandbox.workspace import SessionLimits, WorkspaceSpec
from tasksieve.verifiers.sandbox.wsclient import GuestSession

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def engine() -> Iterator[None]:
    try:
        r = subprocess.run(["docker", "image", "inspect", image_name()], capture_output=True)
    except OSError as e:
        pytest.skip(f"no docker client: {e}")
    if r.returncode != 0:
        pytest.skip(f"no docker engine or no image {image_name()}: {r.stderr[-200:]!r}")
    yield


def _open(snapshot: Path, **limits: float) -> GuestSession:
    from tasksieve.verifiers.sandbox.docker.workspace import open_docker_workspace

    return open_docker_workspace(WorkspaceSpec(str(snapshot), limits=SessionLimits(**limits)))


def _containers(name: str) -> str:
    r = subprocess.run(["docker", "ps", "-aq", "--filter", f"name={name}"], capture_output=True)
    return r.stdout.decode().strip()


def test_docker_session_keeps_state_and_isolates(engine: None, snapshot: Path) -> None:
    before = _containers("tasksieve-ws-")
    ws = _open(snapshot, command_wall_s=30)
    assert _containers("tasksieve-ws-") != before
    try:
        assert ws.exec("cd pkg && export K=9 && sleep 300 &").exit_code == 0
        ws.exec("cd pkg; export K=9")
        r = ws.exec('echo "$PWD $K"; jobs | wc -l')
        assert r.stdout.split() == [b"/workspace/pkg", b"9", b"1"], r
        slow = ws.exec("sleep 30", timeout_s=1)
        assert slow.ended == "wall" and ws.exec("pwd").stdout == b"/workspace/pkg\n"
        for target in ("/snapshot/README", "/etc/planted"):
            assert ws.exec(f"echo x > {target}").exit_code != 0
        with pytest.raises(ValueError):
            ws.write_file("../x", b"x")
        ws.exec("sed -i 's/return 1/return 2/' mod.py && rm ../README")
        diff = ws.diff()
        assert "+    return 2\n" in diff and "deleted file mode 100644" in diff
        net = ws.run(
            ["python3", "-c", "import socket; socket.create_connection(('1.1.1.1', 53), 2)"]
        )
        assert net.exit_code != 0
    finally:
        ws.close()
    assert not ws.alive and ws.exec("true").ended == "session"
    assert _containers("tasksieve-ws-") == before  # the container is removed


def test_docker_commands_report_cpu_seconds(engine: None, snapshot: Path) -> None:
    """The agent is the container's pid 1 here too: a busy loop's CPU shows, a sleep's does not."""
    spin = "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done"
    with _open(snapshot, command_wall_s=30) as ws:
        busy, idle = ws.exec(spin), ws.exec("sleep 0.3")
    assert busy.cpu_s is not None and busy.cpu_s >= 0.03, busy
    assert idle.cpu_s is not None and idle.cpu_s < busy.cpu_s / 2, (idle, busy)
