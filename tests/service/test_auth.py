"""Bearer-token auth: refused without the token, and the local-only flag stays local."""

from __future__ import annotations

import httpx
import pytest

from tasksieve.pipeline.cli import main
from tasksieve.verifiers.service.config import ServiceConfig
from tests.service.servers import Server

WORK = [("POST", "/verify"), ("POST", "/run_code"), ("POST", "/sessions"), ("GET", "/sessions/x")]


@pytest.mark.parametrize("method,path", WORK, ids=[p for _, p in WORK])
@pytest.mark.parametrize("auth", [None, "Bearer wrong-token", "Basic dXNlcjpwYXNz", "Bearer"])
def test_work_endpoints_refuse_without_the_token(
    server: Server, method: str, path: str, auth: str | None
) -> None:
    headers = {"Authorization": auth} if auth else {}
    resp = httpx.request(method, server.url + path, json={}, headers=headers, timeout=10)
    assert resp.status_code == 401 and resp.json()["error"] == "unauthorized"
    assert resp.headers["WWW-Authenticate"] == "Bearer"


@pytest.mark.parametrize("path", ["/healthz", "/metrics"])
def test_probes_need_no_token(server: Server, path: str) -> None:
    assert httpx.get(server.url + path, timeout=10).status_code == 200


@pytest.mark.parametrize("host", ["0.0.0.0", "10.1.2.3", "example.org", "::"])
def test_no_auth_is_refused_off_loopback(host: str) -> None:
    with pytest.raises(ValueError, match="loopback"):
        ServiceConfig(host=host, insecure_no_auth=True)


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "localhost", "127.0.0.2"])
def test_no_auth_is_allowed_on_loopback(host: str) -> None:
    assert ServiceConfig(host=host, insecure_no_auth=True).token is None


def test_serve_without_a_token_exits_2_and_says_how(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("TASKSIEVE_SERVICE_TOKEN", raising=False)
    assert main(["serve", "--port", "1"]) == 2
    assert "TASKSIEVE_SERVICE_TOKEN" in capsys.readouterr().err


def test_serve_no_auth_on_all_interfaces_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--host", "0.0.0.0", "--insecure-no-auth", "--port", "1"]) == 2
    assert "loopback" in capsys.readouterr().err


def test_the_token_file_is_read(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tasksieve.verifiers.service.config import read_token

    monkeypatch.setenv("TASKSIEVE_SERVICE_TOKEN", "from-env")
    (tmp_path / "tok").write_text("from-file\n")
    assert read_token(str(tmp_path / "tok")) == "from-file"
    assert read_token(None) == "from-env"
