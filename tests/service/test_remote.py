"""The remote backend: spreading, failover when a server dies, 429 honoured, config checks."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import pytest

from tasksieve.verifiers import SandboxConfig
from tasksieve.verifiers.registry import VerifierCache, get_verifier
from tasksieve.verifiers.remote import SERVICE_RETRY, RemoteSandbox, RemoteVerifier
from tests.service.servers import TOKEN, Server, free_port, start_server

ROOT = Path(__file__).resolve().parents[2]
ADD = (ROOT / "examples" / "solutions" / "add.task.json").read_text()
GOOD = (ROOT / "examples" / "solutions" / "add_good.py").read_text()


@pytest.fixture
def token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TASKSIEVE_SERVICE_TOKEN", TOKEN)


@pytest.fixture
def pair(tmp_path: Path, server: Server) -> Iterator[tuple[Server, Server]]:
    """A server of its own (to be killed) and the shared one."""
    doomed = start_server(tmp_path, "--workers", "1")
    yield doomed, server
    doomed.stop()


def add_task():
    from tasksieve.schemas import TaskRecord

    return TaskRecord.model_validate_json(ADD)


def test_remote_backend_gets_the_remote_verifier(token: None) -> None:
    sandbox = SandboxConfig(backend="remote", urls=("http://127.0.0.1:9",)).make()
    assert isinstance(sandbox, RemoteSandbox)
    assert isinstance(get_verifier("code", sandbox), RemoteVerifier)


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"backend": "remote"}, "--sandbox-url"),
        ({"backend": "process", "urls": ("http://x",)}, "--sandbox remote"),
        ({"backend": "remote", "urls": ("ftp://x",)}, "http://"),
        ({"backend": "remote", "urls": ("http://x",), "priority": "asap"}, "priority"),
    ],
)
def test_bad_remote_configs_fail_at_construction(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SandboxConfig(**kwargs)


def test_every_request_succeeds_when_one_of_two_servers_is_killed(
    token: None, pair: tuple[Server, Server]
) -> None:
    a, b = pair
    sandbox = SandboxConfig(backend="remote", urls=(a.url, b.url)).make()
    verifier = VerifierCache(sandbox).get("code")
    task = add_task()
    assert verifier.verify(task, GOOD).status == "pass"
    a.stop(signal.SIGKILL)
    with ThreadPoolExecutor(4) as pool:
        verdicts = list(pool.map(lambda _: verifier.verify(task, GOOD).status, range(8)))
    assert verdicts == ["pass"] * 8
    sandbox.close()


def test_all_servers_down_is_an_infra_error_verdict_not_a_crash(token: None) -> None:
    urls = (f"http://127.0.0.1:{free_port()}", f"http://127.0.0.1:{free_port()}")
    sandbox = RemoteSandbox(urls)
    sandbox.client.policy = replace(SERVICE_RETRY, max_attempts=3, base_s=0.01, cap_s=0.05)
    verdict = RemoteVerifier(sandbox, "code").verify(add_task(), GOOD)
    assert verdict.status == "infra_error" and "gave up after 3 attempts" in verdict.detail


def test_where_the_service_runs_does_not_change_the_run_fingerprint() -> None:
    from tasksieve.pipeline.curate.config import CurateConfig

    def fp(*urls: str) -> str:
        sandbox = SandboxConfig(backend="remote", urls=urls)
        return CurateConfig(inputs=("x",), output="o", sandbox=sandbox).fingerprint()

    assert fp("http://a:1") == fp("http://b:2", "http://c:3")
    assert fp("http://a:1") != CurateConfig(inputs=("x",), output="o").fingerprint()


def test_sigterm_drains_requests_in_flight(tmp_path: Path) -> None:
    import threading

    server = start_server(tmp_path, "--workers", "1")
    out: list = []
    body = {"code": "import time; time.sleep(1.5); print('finished')", "run_timeout": 10}
    t = threading.Thread(target=lambda: out.append(server.post("/run_code", body)))
    t.start()
    for _ in range(200):  # until the run is in flight
        if server.get("/healthz").json()["in_flight"]:
            break
        threading.Event().wait(0.02)
    server.proc.send_signal(signal.SIGTERM)
    t.join(30)
    assert out and out[0].status_code == 200
    assert out[0].json()["run_result"]["stdout"] == "finished\n"
    assert server.proc.wait(30) in (0, -signal.SIGTERM)  # uvicorn re-raises it once drained
