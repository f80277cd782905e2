"""Scheduling over HTTP: 429 with Retry-After, deadlines answered 504, idempotency keys."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import httpx
import pytest

from tasksieve.verifiers.remote import SERVICE_RETRY, ServiceClient
from tests.service.servers import TOKEN, Server, start_server

SLEEP = {"code": "import time; time.sleep(1.5); print('slept')", "run_timeout": 10}
RANDOM = {"code": "import secrets; print(secrets.token_hex(16))"}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Path]]:
    """One worker, one queue slot, and a journal of finished keyed jobs."""
    tmp = tmp_path_factory.mktemp("tiny")
    journal = tmp / "journal.jsonl"
    srv = start_server(tmp, "--workers", "1", "--max-queue", "1", "--journal", str(journal))
    yield srv, journal
    srv.stop()


def in_background(server: Server, body: dict, **headers: str) -> tuple[threading.Thread, list]:
    out: list[httpx.Response] = []
    t = threading.Thread(target=lambda: out.append(server.post("/run_code", body, **headers)))
    t.start()
    return t, out


def wait_for(server: Server, depth: int, in_flight: int) -> None:
    for _ in range(200):
        h = server.get("/healthz").json()
        if h["queue_depth"] >= depth and h["in_flight"] >= in_flight:
            return
        threading.Event().wait(0.02)
    raise AssertionError(f"server never reached depth {depth}, in flight {in_flight}")


def test_full_queue_answers_429_with_retry_after(tiny: tuple[Server, Path]) -> None:
    server, _ = tiny
    running, _ = in_background(server, SLEEP)
    wait_for(server, 0, 1)
    queued, _ = in_background(server, SLEEP)
    wait_for(server, 1, 1)
    resp = server.post("/run_code", RANDOM)
    assert resp.status_code == 429 and resp.json()["error"] == "queue_full"
    assert int(resp.headers["Retry-After"]) >= 1
    running.join(30)
    queued.join(30)
    assert 'tasksieve_rejected_total{reason="queue_full"}' in server.get("/metrics").text


def test_request_past_its_deadline_is_dropped_and_says_so(tiny: tuple[Server, Path]) -> None:
    server, _ = tiny
    running, _ = in_background(server, SLEEP)
    wait_for(server, 0, 1)
    resp = server.post("/run_code", RANDOM, **{"X-Deadline-S": "0.2"})
    running.join(30)
    assert resp.status_code == 504 and resp.json()["error"] == "deadline_exceeded"
    assert "dropped before running" in resp.json()["detail"]


def test_same_key_gets_the_first_answer_and_runs_once(tiny: tuple[Server, Path]) -> None:
    server, journal = tiny
    key = {"Idempotency-Key": "key-once"}
    first, out1 = in_background(server, RANDOM, **key)
    second, out2 = in_background(server, RANDOM, **key)  # concurrent retry
    first.join(30)
    second.join(30)
    later = server.post("/run_code", RANDOM, **key)  # a retry after the answer
    answers = {r.json()["run_result"]["stdout"] for r in (*out1, *out2, later)}
    assert len(answers) == 1 and len(next(iter(answers))) == 33
    runs = [json.loads(line) for line in journal.read_text().splitlines()]
    assert sum(r["key"].endswith("key-once") for r in runs) == 1


def test_same_key_with_another_body_is_a_conflict(tiny: tuple[Server, Path]) -> None:
    server, _ = tiny
    key = {"Idempotency-Key": "key-conflict"}
    assert server.post("/run_code", RANDOM, **key).status_code == 200
    resp = server.post("/run_code", {"code": "print(2)"}, **key)
    assert resp.status_code == 409 and resp.json()["error"] == "idempotency_key_conflict"


@pytest.mark.parametrize("header,value", [("X-Priority", "urgent"), ("X-Deadline-S", "-1")])
def test_malformed_scheduling_headers_are_refused(
    tiny: tuple[Server, Path], header: str, value: str
) -> None:
    assert tiny[0].post("/run_code", RANDOM, **{header: value}).status_code == 400


def rejected_full(server: Server) -> float:
    """The server's count of requests refused with 429 so far."""
    for line in server.get("/metrics").text.splitlines():
        if line.startswith('tasksieve_rejected_total{reason="queue_full"}'):
            return float(line.split()[-1])
    return 0.0


def test_client_waits_out_429_and_gets_through(tiny: tuple[Server, Path]) -> None:
    server, _ = tiny
    before = rejected_full(server)
    policy = replace(SERVICE_RETRY, max_attempts=20, cap_s=0.5)
    client = ServiceClient((server.url,), token=TOKEN, policy=policy)
    body = {"code": "import time; time.sleep(0.5); print('done')", "run_timeout": 10}
    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda _: client.post("/run_code", body), range(4)))
    assert [a["run_result"]["stdout"] for a in answers] == ["done\n"] * 4
    assert rejected_full(server) > before  # it was refused on the way, and got through
