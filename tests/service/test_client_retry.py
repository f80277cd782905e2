"""The service client's failover order and its honouring of Retry-After, against loopback stubs.

The stubs stand in for servers that misbehave in one set way (always 500, 429 then 200); the
client under test is the real one, talking HTTP to them.
"""

from __future__ import annotations

import email.utils
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tasksieve.verifiers.remote import SERVICE_RETRY, RemoteError, ServiceClient
from tests.service.servers import free_port

Answer = tuple[int, dict[str, str], bytes]


class Stub:
    """A loopback HTTP server answering every POST with ``answer(n)`` (n counts from 0)."""

    def __init__(self, answer: Callable[[int], Answer]) -> None:
        self.hits = 0
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                status, headers, body = answer(stub.hits)
                stub.hits += 1
                self.send_response(status)
                for name, value in {**headers, "Content-Length": str(len(body))}.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                return None

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


OK: Answer = (200, {"Content-Type": "application/json"}, b'{"ok": true}')
BROKEN: Answer = (500, {}, b"internal error")


@pytest.fixture
def stubs() -> Iterator[list[Stub]]:
    made: list[Stub] = []
    yield made
    for stub in made:
        stub.close()


def stub(made: list[Stub], answer: Callable[[int], Answer]) -> Stub:
    made.append(Stub(answer))
    return made[-1]


def client(urls: tuple[str, ...], sleeps: list[float], attempts: int = 8) -> ServiceClient:
    policy = replace(SERVICE_RETRY, max_attempts=attempts)
    return ServiceClient(urls, token="t", policy=policy, sleep=sleeps.append)


def test_a_server_answering_500_fails_over_to_the_healthy_one(stubs: list[Stub]) -> None:
    broken, healthy = stub(stubs, lambda n: BROKEN), stub(stubs, lambda n: OK)
    c = client((broken.url, healthy.url), [])
    assert [c.post("/verify", {})["ok"] for _ in range(10)] == [True] * 10
    assert healthy.hits == 10 and broken.hits <= 10  # at most one try on it per request


def test_one_server_down_and_one_answering_500_still_reach_the_third(stubs: list[Stub]) -> None:
    broken, healthy = stub(stubs, lambda n: BROKEN), stub(stubs, lambda n: OK)
    down = f"http://127.0.0.1:{free_port()}"
    c = client((down, broken.url, healthy.url), [])
    assert [c.post("/verify", {})["ok"] for _ in range(9)] == [True] * 9
    assert healthy.hits == 9


def test_every_server_is_tried_before_giving_up(stubs: list[Stub]) -> None:
    broken = stub(stubs, lambda n: BROKEN)
    down = f"http://127.0.0.1:{free_port()}"
    c = client((down, broken.url), [], attempts=4)
    with pytest.raises(RemoteError, match="gave up after 4 attempts"):
        c.post("/verify", {})
    assert broken.hits == 2  # attempts alternate between the two servers


def http_date(seconds_from_now: float) -> str:
    return email.utils.formatdate(time.time() + seconds_from_now, usegmt=True)


@pytest.mark.parametrize(
    ("header", "low", "high"),
    [("30", 30.0, 30.0), ("45.5", 45.5, 45.5), ("http-date:40", 38.0, 40.0), ("86400", 60, 60)],
    ids=["seconds", "fraction", "http-date", "capped-at-60"],
)
def test_retry_after_is_honoured_up_to_the_stated_maximum(
    stubs: list[Stub], header: str, low: float, high: float
) -> None:
    value = http_date(float(header.split(":")[1])) if header.startswith("http-date") else header
    limited = stub(stubs, lambda n: (429, {"Retry-After": value}, b"busy") if n == 0 else OK)
    sleeps: list[float] = []
    assert client((limited.url,), sleeps).post("/run_code", {})["ok"] is True
    assert len(sleeps) == 1 and low <= sleeps[0] <= high


def test_a_conflicting_idempotency_key_is_not_retried(stubs: list[Stub]) -> None:
    conflict = stub(stubs, lambda n: (409, {}, b'{"error": "idempotency_key_conflict"}'))
    with pytest.raises(RemoteError, match="HTTP 409"):
        client((conflict.url,), []).post("/verify", {})
    assert conflict.hits == 1
