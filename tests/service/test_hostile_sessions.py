"""Hostile clients and hostile code against packed sessions on a real ``tasksieve serve``.

The server runs with ``--session-mode packed`` (files packed in and out per exec, the fallback
where the sandbox opens no workspaces): forged exec reports only exist there. Live sessions
have their own hostile suite (``test_hostile_live``).

Oversized and chunked uploads, overwrites, odd names, exec reports forged from inside the
sandbox, long execs against a short TTL, reads racing execs, and a shutdown with work queued.
"""

from __future__ import annotations

import json
import signal
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.service.hostile import FLAGS, SESSION_BYTES, chunked, raw_request
from tests.service.servers import Server, start_server


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = start_server(
        tmp_path_factory.mktemp("hostile-sessions"), *FLAGS, "--session-mode", "packed"
    )
    yield srv
    srv.stop()


def create(server: Server, **limits: float) -> str:
    resp = server.post("/sessions", dict(limits))
    assert resp.status_code == 201, resp.text
    return str(resp.json()["session_id"])


def put(server: Server, sid: str, name: str, data: bytes) -> httpx.Response:
    url = f"{server.url}/sessions/{sid}/files/{name}"
    return httpx.put(url, content=data, headers=server.headers(), timeout=30)


def stored(server: Server, sid: str) -> dict[str, int]:
    resp = server.get(f"/sessions/{sid}")
    assert resp.status_code == 200, resp.text
    return dict(resp.json()["files"])


# ---------------------------------------------------------------- uploads
def test_an_overwrite_counts_once_against_the_quota(hostile: Server) -> None:
    sid = create(hostile)
    size = SESSION_BYTES * 6 // 10
    assert put(hostile, sid, "a.txt", b"1" * size).status_code == 200
    assert put(hostile, sid, "a.txt", b"2" * size).status_code == 200, "an overwrite is not new"
    assert put(hostile, sid, "b.txt", b"3" * size).status_code == 413


def test_a_chunked_upload_past_the_quota_is_413_while_it_streams(hostile: Server) -> None:
    sid = create(hostile)
    headers = {**hostile.headers(), "Transfer-Encoding": "chunked"}
    parts = chunked([b"x" * 4096] * (SESSION_BYTES // 4096 + 4))  # never ends
    status, body = raw_request(hostile, "PUT", f"/sessions/{sid}/files/big", headers, parts)
    assert status == 413 and stored(hostile, sid) == {}, body


def test_an_upload_declared_past_the_quota_is_413_before_it_is_sent(hostile: Server) -> None:
    sid = create(hostile)
    headers = {**hostile.headers(), "Content-Length": str(SESSION_BYTES + 1)}
    status, _ = raw_request(hostile, "PUT", f"/sessions/{sid}/files/big", headers, timeout=5)
    assert status == 413


@pytest.mark.parametrize(
    ("first", "second"),
    [("a", "a/b"), ("a/b", "a"), ("d/e", "d")],
    ids=["parent-is-a-file", "file-over-a-directory", "directory-named-again"],
)
def test_a_path_clashing_with_a_file_or_directory_is_4xx(
    hostile: Server, first: str, second: str
) -> None:
    sid = create(hostile)
    assert put(hostile, sid, first, b"x").status_code == 200
    resp = put(hostile, sid, second, b"y")
    assert 400 <= resp.status_code < 500, resp.text


@pytest.mark.parametrize("name", ["x%00y", "%00", "dir/%00/f"])
def test_a_nul_in_a_name_is_400(hostile: Server, name: str) -> None:
    sid = create(hostile)
    assert put(hostile, sid, name, b"x").status_code == 400
    assert hostile.get(f"/sessions/{sid}/files/{name}").status_code == 400


# ---------------------------------------------------------------- forged exec reports
def forge(report: str, kill_the_packer: bool = True) -> str:
    """Code that writes its own exec report (``report``: a Python expression giving its
    text) and, by default, kills the guest that packs files."""
    code = "import base64, json, os, signal\n"
    code += f"open('.tasksieve_out.json', 'w').write({report})\n"
    if kill_the_packer:
        code += "os.kill(os.getppid(), signal.SIGKILL)\n"
    return code


BIG = "base64.b64encode(b'z' * 150_000).decode()"  # built in the sandbox: bodies are small
FORGED = {
    "over_quota": "json.dumps({'exit': 0, 'timed_out': False, 'dropped': [], 'files': "
    f"{{f'f{{i}}': {BIG} for i in range(5)}}}})",
    "not_json": repr("{{{{"),
    "files_not_a_dict": repr(json.dumps({"files": ["a", "b"]})),
    "bad_names": repr(json.dumps({"files": {"../x": "eA==", "/etc/y": "eA==", "a\x00b": "eA=="}})),
    "bad_base64": repr(json.dumps({"files": {"ok": "!!!"}})),
    "file_and_dir": repr(json.dumps({"files": {"p": "eA==", "p/q": "eA=="}})),
}


@pytest.mark.parametrize("name", sorted(FORGED))
def test_a_forged_exec_report_cannot_pass_the_quota_or_break_the_server(
    hostile: Server, name: str
) -> None:
    sid = create(hostile)
    resp = hostile.post(f"/sessions/{sid}/exec", {"code": forge(FORGED[name]), "timeout_s": 10})
    assert resp.status_code == 200, resp.text
    assert resp.json()["exit_code"] != 0  # what the sandbox saw: the packer was killed
    files = stored(hostile, sid)
    assert sum(files.values()) <= SESSION_BYTES and not any(".." in n for n in files), files


def test_the_exit_status_is_the_commands_whatever_the_report_says(hostile: Server) -> None:
    sid = create(hostile)
    report = repr(json.dumps({"exit": 0, "timed_out": False, "files": {}, "dropped": []}))
    code = forge(report, kill_the_packer=False) + "raise SystemExit(3)\n"
    assert hostile.post(f"/sessions/{sid}/exec", {"code": code}).json()["exit_code"] == 3


def test_files_written_past_the_quota_are_dropped_by_the_host(hostile: Server) -> None:
    sid = create(hostile)
    code = "for i in range(3):\n    open(f'f{i}', 'wb').write(b'x' * 4000)\n"
    got = hostile.post(f"/sessions/{sid}/exec", {"code": code}).json()
    assert got["files"] == ["f0", "f1"] and got["dropped"] == ["f2"]
    assert sum(stored(hostile, sid).values()) == 8000


# ---------------------------------------------------------------- lifetime and races
def test_an_exec_longer_than_the_ttl_keeps_its_session(hostile: Server) -> None:
    sid = create(hostile, ttl_s=1)
    code = "import time; time.sleep(2.5); open('done', 'w').write('yes')"
    got = hostile.post(f"/sessions/{sid}/exec", {"code": code, "timeout_s": 10})
    assert got.status_code == 200 and got.json()["files"] == ["done"], got.text
    assert hostile.get(f"/sessions/{sid}/files/done").content == b"yes"


def test_reads_during_execs_never_fail(hostile: Server) -> None:
    sid = create(hostile)
    assert put(hostile, sid, "keep.txt", b"steady").status_code == 200
    code = "import os\nos.makedirs('d', exist_ok=True)\n"  # many files: a long rglob
    code += "for i in range(100):\n    open(f'd/f{i}', 'w').write('s')\n"
    stop = threading.Event()

    def execs() -> None:
        try:
            for _ in range(10):
                resp = hostile.post(f"/sessions/{sid}/exec", {"code": code})
                assert resp.status_code == 200, resp.text
        finally:
            stop.set()

    def reader() -> list[int]:
        seen = []
        while not stop.is_set():
            seen.append(hostile.get(f"/sessions/{sid}/files").status_code)
            got = hostile.get(f"/sessions/{sid}/files/keep.txt")
            seen.append(got.status_code if got.content == b"steady" else -1)
        return seen

    with ThreadPoolExecutor(4) as pool:
        readers = [pool.submit(reader) for _ in range(3)]
        pool.submit(execs).result(300)
        statuses = [s for r in readers for s in r.result(60)]
    assert statuses and set(statuses) == {200}


def test_shutdown_with_work_queued_answers_everyone_and_leaves_no_session_files(
    tmp_path: Path,
) -> None:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    server = start_server(
        tmp_path, "--workers", "1", "--session-mode", "packed", env_extra={"TMPDIR": str(scratch)}
    )
    sid = create(server)
    assert put(server, sid, "a.txt", b"x").status_code == 200
    answers: list[int] = []

    def call(seconds: float) -> None:
        code = f"import time; time.sleep({seconds})"
        try:
            answers.append(server.post("/run_code", {"code": code}, timeout=60).status_code)
        except httpx.TransportError:
            answers.append(-1)

    threads = [threading.Thread(target=call, args=(s,)) for s in (1.5, 0.1, 0.1, 0.1)]
    for t in threads:
        t.start()
    for _ in range(500):
        if server.get("/healthz").json()["queue_depth"] == 3:
            break
        threading.Event().wait(0.02)
    server.proc.send_signal(signal.SIGTERM)
    for t in threads:
        t.join(60)
    assert len(answers) == 4 and -1 not in answers, answers
    assert server.proc.wait(30) in (0, -signal.SIGTERM)
    assert not list(scratch.glob("tasksieve-sessions-*"))
