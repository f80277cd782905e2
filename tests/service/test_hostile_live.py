"""Hostile clients and hostile code against live sessions (workspaces) on a real server.

A small quota (1 MiB), few sessions and a short hard lifetime: writes past the quota fail in
the sandbox and uploads past it are 413; more sessions than the cap are 429; a session in use
still ends at its lifetime; many sessions created, used and deleted at once leave no process
behind (counted in this host's /proc) and no mount.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.service.servers import Server, start_server
from tests.service.test_sessions import mounts, wait_gone, wait_seen

QUOTA = 1 << 20
MAX_SESSIONS = 12
LIFETIME_S = 4


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    flags = ["--session-mode", "live", "--session-max-bytes", str(QUOTA), "--workers", "4"]
    flags += ["--max-sessions", str(MAX_SESSIONS)]
    srv = start_server(tmp_path_factory.mktemp("live"), *flags)
    yield srv
    srv.stop()


def create(server: Server, **extra: float) -> str:
    resp = server.post("/sessions", {"max_processes": 16, **extra})
    assert resp.status_code == 201, resp.text
    return str(resp.json()["session_id"])


def bash(server: Server, sid: str, code: str, timeout_s: float = 10) -> dict:
    body = {"code": code, "language": "bash", "timeout_s": timeout_s}
    resp = server.post(f"/sessions/{sid}/exec", body)
    assert resp.status_code == 200, resp.text
    return resp.json()


def delete(server: Server, sid: str) -> int:
    return httpx.delete(f"{server.url}/sessions/{sid}", headers=server.headers()).status_code


def test_the_quota_holds_for_writes_in_the_sandbox_and_for_uploads(live: Server) -> None:
    sid = create(live)
    got = bash(live, sid, "head -c 3000000 /dev/zero > big; echo rc=$?")
    assert "rc=1" in got["stdout"], got
    assert "No space left" in got["stderr"] or "File too large" in got["stderr"], got
    url = f"{live.url}/sessions/{sid}/files/more"
    assert httpx.put(url, content=b"x" * QUOTA, headers=live.headers()).status_code == 413
    bash(live, sid, "rm big")
    assert httpx.put(url, content=b"x" * 1000, headers=live.headers()).status_code == 200
    assert delete(live, sid) == 200


def test_a_session_ends_at_its_lifetime_even_while_used(live: Server) -> None:
    marker = f"{84000 + secrets.randbelow(999)}.{secrets.randbelow(10**6)}"
    sid = create(live, lifetime_s=LIFETIME_S)
    bash(live, sid, f"sleep {marker} &")
    deadline = time.monotonic() + LIFETIME_S + 4
    statuses = []
    while time.monotonic() < deadline and (not statuses or statuses[-1] == 200):
        statuses.append(live.post(f"/sessions/{sid}/exec", {"code": "print(1)"}).status_code)
        time.sleep(0.2)
    assert statuses[-1] == 404, statuses  # used all along, ended by the lifetime
    assert wait_gone(marker, 3) == []


def test_many_sessions_at_once_leave_nothing_and_the_cap_is_429(live: Server) -> None:
    before = mounts(live)
    marker = f"{83000 + secrets.randbelow(999)}.{secrets.randbelow(10**6)}"

    def one(_: int) -> str:
        sid = create(live)
        got = bash(live, sid, f"sleep {marker} & sleep {marker} & echo up")
        assert got["stdout"] == "up\n", got
        return sid

    with ThreadPoolExecutor(6) as pool:
        sids = list(pool.map(one, range(MAX_SESSIONS)))
    assert wait_seen(marker, 2 * MAX_SESSIONS) == 2 * MAX_SESSIONS
    refused = live.post("/sessions", {})
    assert refused.status_code == 429 and "too many sessions" in refused.text
    with ThreadPoolExecutor(6) as pool:
        assert set(pool.map(lambda s: delete(live, s), sids)) == {200}
    assert wait_gone(marker, 10) == []
    assert mounts(live) == before
    assert live.get("/healthz").json()["sessions"] == 0
