"""Hostile clients against a real ``tasksieve serve``: bodies, limits, headers, queueing.

Every test talks HTTP to a server process on loopback; nothing in the service is mocked.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.service.hostile import BODY_BYTES, FLAGS, MEMORY_MB, chunked, raw_request
from tests.service.servers import Server, start_server

ROOT = Path(__file__).resolve().parents[2]
ADD = json.loads((ROOT / "examples" / "solutions" / "add.task.json").read_text())
TOKEN_HEADERS = ("Bearer wrong", "Basic eDp5", "", "Bearer")


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = start_server(tmp_path_factory.mktemp("hostile"), *FLAGS)
    yield srv
    srv.stop()


def auth(server: Server) -> dict[str, str]:
    return {"Authorization": f"Bearer {server.token}"}


# ---------------------------------------------------------------- no token, large or bad bodies
@pytest.mark.parametrize("path", ["/verify", "/run_code", "/sessions", "/sessions/x/exec"])
def test_no_token_is_refused_before_a_huge_body_is_sent(hostile: Server, path: str) -> None:
    headers = {"Content-Type": "application/json", "Content-Length": str(200_000_000)}
    status, body = raw_request(hostile, "POST", path, headers, timeout=5)
    assert status == 401 and json.loads(body)["error"] == "unauthorized"


@pytest.mark.parametrize("given", TOKEN_HEADERS)
@pytest.mark.parametrize("body", [b"{not json", b"\xff\xfe\x00", b"[" * 10_000])
def test_no_token_with_a_malformed_body_is_401_not_422(
    hostile: Server, given: str, body: bytes
) -> None:
    headers = {"Authorization": given} if given else {}
    resp = httpx.post(hostile.url + "/verify", content=body, headers=headers, timeout=10)
    assert resp.status_code == 401 and resp.json()["error"] == "unauthorized"


def test_a_declared_body_over_the_limit_is_413_before_it_is_sent(hostile: Server) -> None:
    headers = {**auth(hostile), "Content-Length": str(BODY_BYTES + 1)}
    status, body = raw_request(hostile, "POST", "/verify", headers, timeout=5)
    assert status == 413 and json.loads(body)["error"] == "too_large"


def test_a_chunked_body_over_the_limit_is_cut_off_while_it_streams(hostile: Server) -> None:
    headers = {**auth(hostile), "Transfer-Encoding": "chunked"}
    parts = chunked([b"x" * 8192] * (BODY_BYTES // 8192 + 4))  # never ends: no last chunk
    status, body = raw_request(hostile, "POST", "/run_code", headers, parts, timeout=5)
    assert status == 413 and json.loads(body)["error"] == "too_large"


def test_a_chunked_body_under_the_limit_still_works(hostile: Server) -> None:
    payload = json.dumps({"code": "print(6 * 7)"}).encode()
    headers = {**auth(hostile), "Transfer-Encoding": "chunked", "Content-Type": "application/json"}
    status, body = raw_request(hostile, "POST", "/run_code", headers, chunked([payload], True))
    assert status == 200 and json.loads(body)["run_result"]["stdout"] == "42\n"


# ---------------------------------------------------------------- extreme limits and headers
@pytest.mark.parametrize("memory", [MEMORY_MB + 1, 10**9, 2**62])
def test_run_code_memory_over_the_server_bound_is_422(hostile: Server, memory: int) -> None:
    resp = hostile.post("/run_code", {"code": "print(1)", "memory_limit_MB": memory})
    assert resp.status_code == 422, resp.text


@pytest.mark.parametrize("memory", [MEMORY_MB + 1, 10**9])
def test_session_memory_over_the_server_bound_is_422(hostile: Server, memory: int) -> None:
    assert hostile.post("/sessions", {"memory_mb": memory}).status_code == 422


def test_a_task_asking_for_more_memory_than_the_bound_is_422(hostile: Server) -> None:
    task = {**ADD, "verifier": {**ADD["verifier"], "memory_mb": MEMORY_MB * 2}}
    resp = hostile.post("/verify", {"task": task, "solution": ADD["reference_solution"]})
    assert resp.status_code == 422, resp.text


@pytest.mark.parametrize("reference_s", [1000, 1e308, "inf", "nan", -1, 0])
def test_an_unbounded_reference_runtime_is_refused(hostile: Server, reference_s: object) -> None:
    body = {"task": ADD, "solution": ADD["reference_solution"], "reference_s": reference_s}
    content = json.dumps(body).replace('"inf"', "Infinity").replace('"nan"', "NaN")
    resp = httpx.post(
        hostile.url + "/verify",
        content=content,
        headers={**auth(hostile), "Content-Type": "application/json"},
        timeout=30,
    )
    assert resp.status_code == 422, resp.text


@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "-inf", "1e999", "-1", "0", "soon", "0x10"])
def test_a_deadline_that_is_not_a_finite_positive_number_is_400(
    hostile: Server, value: str
) -> None:
    resp = hostile.post("/run_code", {"code": "print(1)"}, **{"X-Deadline-S": value})
    assert resp.status_code == 400, resp.text


@pytest.mark.parametrize(
    "headers",
    [{"X-Priority": "1e999"}, {"X-Priority": "urgent"}, {"Idempotency-Key": "k" * 201}],
    ids=["priority-float", "priority-name", "key-too-long"],
)
def test_malformed_scheduling_headers_are_400(hostile: Server, headers: dict[str, str]) -> None:
    assert hostile.post("/run_code", {"code": "print(1)"}, **headers).status_code == 400


def test_calibration_sent_by_one_caller_does_not_loosen_another(hostile: Server) -> None:
    task = {**ADD, "id": "code.add.calibrated"}
    task["verifier"] = {**ADD["verifier"], "timeout_s": 1.0}
    slow = (
        "import time\n_slept = []\ndef add(a, b):\n    if not _slept:\n"
        "        _slept.append(1)\n        time.sleep(4)\n    return a + b\n"
    )
    body = {"task": task, "solution": slow}
    loose = hostile.post("/verify", {**body, "reference_s": 2.0}, **{"X-Client-Id": "a"})
    assert loose.json()["status"] == "pass", loose.text  # its own limit: 5 x 2 s
    strict = hostile.post("/verify", body, **{"X-Client-Id": "b"})
    assert strict.json()["status"] == "timeout", strict.text


# ---------------------------------------------------------------- queueing
def hold_the_worker(server: Server, seconds: float) -> threading.Thread:
    """Occupy the server's one worker with a run of ``seconds``; returns when it runs."""
    code = f"import time; time.sleep({seconds})"
    t = threading.Thread(target=server.post, args=("/run_code", {"code": code}), daemon=True)
    t.start()
    for _ in range(500):
        if server.get("/healthz").json()["in_flight"]:
            return t
        threading.Event().wait(0.02)
    raise AssertionError("the blocking run never started")


def test_a_deadline_expires_while_the_job_waits(hostile: Server) -> None:
    blocker = hold_the_worker(hostile, 5)
    resp = hostile.post("/run_code", {"code": "print(1)"}, **{"X-Deadline-S": "0.3"})
    assert resp.status_code == 504 and resp.json()["error"] == "deadline_exceeded"
    assert hostile.get("/healthz").json()["in_flight"] == 1  # answered while the worker was
    blocker.join(30)  # still busy with the blocking run, not when it finished


def test_clients_that_disconnect_while_queued_leave_the_server_healthy(hostile: Server) -> None:
    blocker = hold_the_worker(hostile, 1.5)
    for _ in range(4):
        with pytest.raises(httpx.TimeoutException):
            hostile.post("/run_code", {"code": "print('gone')"}, timeout=0.2)
    resp = hostile.post("/run_code", {"code": "print('here')"})
    assert resp.status_code == 200 and resp.json()["run_result"]["stdout"] == "here\n"
    blocker.join(30)
    assert hostile.get("/healthz").json()["queue_depth"] == 0
