"""Live sessions: files, the shell's state and processes persist between execs; sessions are
isolated, and deleting one or its expiry ends every process in it."""

from __future__ import annotations

import os
import secrets
import time

import httpx
import pytest

from tests.service.servers import Server


def create(server: Server, **limits: float) -> str:
    resp = server.post("/sessions", dict(limits))
    assert resp.status_code == 201, resp.text
    return str(resp.json()["session_id"])


def execute(server: Server, sid: str, **body: object) -> dict:
    resp = server.post(f"/sessions/{sid}/exec", dict(body))
    assert resp.status_code == 200, resp.text
    return resp.json()


def put(server: Server, sid: str, name: str, data: bytes) -> httpx.Response:
    return httpx.put(
        f"{server.url}/sessions/{sid}/files/{name}", content=data, headers=server.headers()
    )


def test_files_persist_between_execs(server: Server) -> None:
    sid = create(server)
    assert put(server, sid, "data/in.txt", b"hello").status_code == 200
    first = execute(
        server, sid, code="s = open('data/in.txt').read()\nopen('out.txt','w').write(s*2)"
    )
    assert first["exit_code"] == 0 and first["files"] == ["data/in.txt", "out.txt"]
    second = execute(server, sid, command=["bash", "-c", "cat out.txt; rm data/in.txt"])
    assert second["stdout"] == "hellohello" and second["files"] == ["out.txt"]
    assert server.get(f"/sessions/{sid}/files/out.txt").content == b"hellohello"
    assert server.get(f"/sessions/{sid}/files/data/in.txt").status_code == 404


def host_pids(marker: str) -> list[int]:
    """Host processes whose command line holds ``marker`` (read from this host's /proc)."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as fh:
                    if marker.encode() in fh.read():
                        pids.append(int(entry))
            except OSError:
                continue
    return pids


DOCKER_MOUNTS = ("/var/lib/docker/", "/run/docker/")


def mounts(server: Server) -> int:
    """Mounts in the server's mount namespace, less docker's own (containers of other users of
    this host come and go; a process-backend session mounts nothing there)."""
    with open(f"/proc/{server.proc.pid}/mountinfo") as fh:
        points = [line.split()[4] for line in fh]
    return sum(not p.startswith(DOCKER_MOUNTS) for p in points)


def wait_seen(marker: str, count: int, within_s: float = 5) -> int:
    """How many host processes hold ``marker`` once ``count`` do (or the time is up): a
    background job's fork may not have reached its ``exec`` when its command answers."""
    deadline = time.monotonic() + within_s
    while len(seen := host_pids(marker)) < count and time.monotonic() < deadline:
        time.sleep(0.05)
    return len(seen)


def wait_gone(marker: str, within_s: float) -> list[int]:
    deadline = time.monotonic() + within_s
    while (left := host_pids(marker)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def test_cwd_variables_and_stdin_persist_in_the_shell(server: Server) -> None:
    sid = create(server)
    execute(server, sid, code="mkdir -p work && cd work && export GREETING=hi", language="bash")
    got = execute(
        server,
        sid,
        code='echo "$PWD $GREETING"; cat > here.txt',
        language="bash",
        stdin="from stdin",
    )
    assert got["stdout"] == "/workspace/work hi\n" and got["files"] == ["work/here.txt"], got
    assert server.get(f"/sessions/{sid}/files/work/here.txt").content == b"from stdin"
    py = execute(server, sid, code="import os; print(os.getcwd())", list_files=False)
    assert py["stdout"] == "/workspace/work\n" and py["files"] == []


def test_processes_persist_in_a_session_and_die_with_its_deletion(server: Server) -> None:
    marker = f"{86000 + secrets.randbelow(399)}.{secrets.randbelow(10**6)}"
    mounts_before = mounts(server)
    sid = create(server)
    execute(server, sid, code=f"sleep {marker} & echo $! > pid", language="bash")
    assert wait_seen(marker, 1) == 1  # running on the host after its exec answered
    check = execute(server, sid, code="kill -0 $(cat pid) && echo alive", language="bash")
    assert check["stdout"] == "alive\n", check
    assert httpx.delete(f"{server.url}/sessions/{sid}", headers=server.headers()).status_code == 200
    assert wait_gone(marker, 5) == []
    assert mounts(server) == mounts_before


def test_an_expired_session_takes_its_processes_with_it(server: Server) -> None:
    marker = f"{86400 + secrets.randbelow(399)}.{secrets.randbelow(10**6)}"
    sid = create(server, ttl_s=1)
    execute(server, sid, code=f"sleep {marker} &", language="bash")
    assert wait_seen(marker, 1) == 1
    assert wait_gone(marker, 6) == []  # the ttl (1 s) plus the reaper's period (1 s)
    assert server.post(f"/sessions/{sid}/exec", {"code": "print(1)"}).status_code == 404


def test_sessions_do_not_see_each_other(server: Server) -> None:
    a, b = create(server), create(server)
    put(server, a, "secret.txt", b"only-a")
    seen = execute(server, b, code="import os; print(sorted(os.listdir('.')))")
    assert "secret.txt" not in seen["stdout"]
    probe = "import glob; print(glob.glob('/tmp/**/secret.txt', recursive=True))"
    assert execute(server, b, code=probe, timeout_s=20)["stdout"] == "[]\n"
    assert server.get(f"/sessions/{b}/files/secret.txt").status_code == 404


def test_an_exec_over_its_time_keeps_the_files_it_wrote(server: Server) -> None:
    sid = create(server)
    got = execute(
        server, sid, code="open('a','w').write('x')\nimport time; time.sleep(60)", timeout_s=1
    )
    assert got["timed_out"] is True and got["files"] == ["a"]


@pytest.mark.parametrize("name", ["../escape", "/etc/passwd", "a/../../b", ".tasksieve_in.json"])
def test_file_names_stay_inside_the_session(server: Server, name: str) -> None:
    sid = create(server)
    resp = put(server, sid, name, b"x")
    assert resp.status_code in (400, 404), resp.text


def test_deleted_session_is_gone(server: Server) -> None:
    sid = create(server)
    assert httpx.delete(f"{server.url}/sessions/{sid}", headers=server.headers()).status_code == 200
    assert server.post(f"/sessions/{sid}/exec", {"code": "print(1)"}).status_code == 404


def test_idle_sessions_expire_and_are_reaped(server: Server) -> None:
    before = server.get("/healthz").json()["sessions"]
    sid = create(server, ttl_s=1)
    assert execute(server, sid, code="print(1)")["exit_code"] == 0
    assert server.get("/healthz").json()["sessions"] == before + 1
    time.sleep(2.5)  # the ttl (1 s) plus the reaper's period (1 s)
    assert server.get("/healthz").json()["sessions"] == before  # reaped, not just refused
    assert server.post(f"/sessions/{sid}/exec", {"code": "print(1)"}).status_code == 404


HOSTILE_STEPS = {
    "fork_bomb": (
        "import os\ntry:\n while True:\n  if os.fork() == 0:\n   import time; time.sleep(30)\n"
        "except OSError: print('capped')",
        lambda r: "capped" in r["stdout"],
    ),
    "network": (
        "import socket\ntry:\n socket.create_connection(('1.1.1.1', 53), 2); print('OUT')\n"
        "except OSError: print('blocked')",
        lambda r: r["stdout"] == "blocked\n",
    ),
    "host_files": (
        "import os\nfor p in ('/etc/shadow', '/home'):\n try: print(os.listdir(p) if "
        "os.path.isdir(p) else open(p).read()[:9])\n except OSError: print('denied')",
        lambda r: r["stdout"] == "denied\ndenied\n",
    ),
    "sleep_forever": ("import time\ntime.sleep(3600)", lambda r: r["timed_out"] is True),
}


@pytest.mark.parametrize("name", sorted(HOSTILE_STEPS))
def test_hostile_steps_are_contained_and_the_session_survives(server: Server, name: str) -> None:
    sid = create(server, memory_mb=256, max_processes=16)
    code, contained = HOSTILE_STEPS[name]
    got = execute(server, sid, code=code, timeout_s=2)
    assert contained(got), got
    assert execute(server, sid, code="print('still here')")["stdout"] == "still here\n"
