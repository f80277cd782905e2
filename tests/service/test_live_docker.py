"""Live sessions on the docker backend behind ``tasksieve serve``: the shell keeps its state
and processes, and deleting the session ends them (counted in this host's /proc, where a
container's processes show too). Skipped where docker cannot run."""

from __future__ import annotations

import secrets
from pathlib import Path

import httpx
import pytest

from tasksieve.verifiers.registry import make_sandbox
from tasksieve.verifiers.sandbox.base import SandboxUnavailable
from tests.service.servers import start_server
from tests.service.test_sessions import wait_gone, wait_seen


def docker_missing() -> str | None:
    try:
        make_sandbox("docker").close()
    except (SandboxUnavailable, ImportError) as exc:
        return str(exc)
    return None


@pytest.mark.slow
def test_a_live_docker_session_keeps_its_shell_and_ends_with_its_processes(
    tmp_path: Path,
) -> None:
    if why := docker_missing():
        pytest.skip(f"docker sandbox unavailable: {why}")
    server = start_server(tmp_path, "--sandbox", "docker", "--session-mode", "live")
    try:
        made = server.post("/sessions", {}, timeout=120)
        assert made.status_code == 201 and made.json()["live"] is True, made.text
        sid = made.json()["session_id"]
        marker = f"{82000 + secrets.randbelow(999)}.{secrets.randbelow(10**6)}"
        code = f"mkdir -p w && cd w && export X=7 && (sleep {marker} &)"
        body = {"code": code, "language": "bash"}
        assert server.post(f"/sessions/{sid}/exec", body).json()["exit_code"] == 0
        got = server.post(f"/sessions/{sid}/exec", {"code": 'echo "$PWD $X"', "language": "bash"})
        assert got.json()["stdout"] == "/workspace/w 7\n", got.text
        assert wait_seen(marker, 1) == 1
        url = f"{server.url}/sessions/{sid}"
        assert httpx.delete(url, headers=server.headers(), timeout=60).status_code == 200
        assert wait_gone(marker, 20) == []
    finally:
        server.stop()
