"""Tests for the API-workflow verifier: examples, hostile candidates, comparison rules."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tasksieve.schemas import ApiSpec, TaskRecord
from tasksieve.transforms.samplers import extract_solution
from tasksieve.verifiers.families.api import verifier as api_mod
from tasksieve.verifiers.families.api.verifier import ApiVerifier, compare, site_paths
from tasksieve.verifiers.sandbox.base import Limits
from tasksieve.verifiers.sandbox.process.sandbox import ProcessSandbox

ROOT = Path(__file__).resolve().parents[2]
TASKS = {
    t.id: t
    for t in (
        TaskRecord.model_validate_json(line)
        for line in (ROOT / "examples/tasks/api.jsonl").read_text().splitlines()
        if line.strip()
    )
}
REPLAY_PASSES = {  # examples/README.md, "replay passes (of 4)"
    "api.s3_put_hello": 4,
    "api.s3_csv_summary": 2,
    "api.orders_to_sqs": 2,
    "api.errors_to_logs": 1,
    "api.archive_done_jobs": 0,
    "api.drain_signups": 0,
}


def _sees_site(sb: ProcessSandbox) -> bool:
    probe = f"import os; print(all(os.path.isdir(p) for p in {site_paths(sb)!r}))"
    ex = sb.run({}, [sb.python, "-I", "-S", "-c", probe], Limits(wall_s=20, cpu_s=10))
    return ex.stdout.strip() == b"True"


@pytest.fixture(scope="module")
def api_verifier() -> Iterator[ApiVerifier]:
    sb = ProcessSandbox()
    yield ApiVerifier(sb)
    sb.close()


def test_sandbox_shows_the_venv_packages(api_verifier: ApiVerifier) -> None:
    sb = api_verifier.sandbox
    assert isinstance(sb, ProcessSandbox)
    assert _sees_site(sb)


def _task(verifier: dict[str, Any], tid: str = "api.test") -> TaskRecord:
    return TaskRecord.model_validate(
        {
            "id": tid,
            "family": "api",
            "prompt": "test",
            "verifier": {"family": "api", **verifier},
            "reference_solution": "",
        }
    )


HELLO = _task(
    {
        "services": ["s3"],
        "initial_state": {"buckets": {"greetings": {}}},
        "expected_state": {"objects": {"greetings": {"hello.txt": "hello, world"}}},
        "timeout_s": 20,
    }
)
PUT_HELLO = (
    'import boto3\nboto3.client("s3").put_object(Bucket="greetings", Key="hello.txt", '
    'Body=b"hello, world")\n'
)


# ---------------------------------------------------------------- examples
@pytest.mark.parametrize("tid", sorted(TASKS))
def test_reference_passes(api_verifier: ApiVerifier, tid: str) -> None:
    v = api_verifier.verify(TASKS[tid], TASKS[tid].reference_solution)
    assert v.status == "pass", v.detail
    assert v.tests_passed == v.tests_total == TASKS[tid].verifier.test_count()


@pytest.mark.parametrize("tid", sorted(TASKS))
def test_replay_pass_counts_match_readme(api_verifier: ApiVerifier, tid: str) -> None:
    lines = (ROOT / "examples/replay/completions.jsonl").read_text().splitlines()
    comps = [c["completion"] for c in map(json.loads, lines) if c["task_id"] == tid]
    passes = sum(
        api_verifier.verify(TASKS[tid], extract_solution(c, "api")).status == "pass" for c in comps
    )
    assert passes == REPLAY_PASSES[tid]


@pytest.mark.parametrize("tid", ["api.s3_put_hello", "api.drain_signups"])
def test_trivial_solutions_fail(api_verifier: ApiVerifier, tid: str) -> None:
    for sol in api_verifier.trivial_solutions(TASKS[tid]):
        assert api_verifier.verify(TASKS[tid], sol).status == "fail"


def test_api_calls_are_recorded(api_verifier: ApiVerifier) -> None:
    out = api_verifier.verify_detailed(HELLO, PUT_HELLO)
    assert out.verdict.status == "pass"
    assert [(c["service"], c["op"], c["status"]) for c in out.calls] == [("s3", "PutObject", 200)]
    assert "s3.PutObject" in out.verdict.detail
    assert len(out.verdict.trace) == 1 and out.verdict.trace[0].startswith("s3.PutObject ")


# ---------------------------------------------------------------- candidate failures
def test_crash_without_state_change_is_error_with_stderr(api_verifier: ApiVerifier) -> None:
    v = api_verifier.verify(HELLO, "raise RuntimeError('boom-marker')\n")
    assert v.status == "error"
    assert "boom-marker" in v.detail


def test_timeout_is_reported_even_after_correct_state(api_verifier: ApiVerifier) -> None:
    task = _task({**HELLO.verifier.model_dump(), "timeout_s": 2})
    v = api_verifier.verify(task, PUT_HELLO + "import time\ntime.sleep(60)\n")
    assert v.status == "timeout"
    assert v.limit_hit == "wall"


# ---------------------------------------------------------------- hostile candidates
def test_real_endpoint_client_cannot_connect(api_verifier: ApiVerifier) -> None:
    sol = textwrap.dedent(
        """
        import boto3
        s3 = boto3.client("s3", endpoint_url="https://s3.amazonaws.com")
        s3.put_object(Bucket="greetings", Key="hello.txt", Body=b"hello, world")
        """
    )
    v = api_verifier.verify(HELLO, sol)
    assert v.status == "error"
    assert "EndpointConnectionError" in v.detail or "Could not connect" in v.detail


# Each probe writes what it found into the local bucket, so "pass" means "found nothing".
PROBES = {
    "real_endpoint": """
        try:
            cfg = botocore.config.Config(connect_timeout=2, retries={"max_attempts": 0})
            s3 = boto3.client("s3", endpoint_url="https://s3.amazonaws.com", config=cfg)
            s3.list_buckets()
            found.append("reached s3.amazonaws.com")
        except botocore.exceptions.EndpointConnectionError:
            pass
        """,
    "raw_socket": """
        import socket
        others = {n for _, n in socket.if_nameindex()} - {"lo"}
        if others:  # checked without sending: no interface but loopback, so no way out
            found.append(f"interfaces {sorted(others)}")
        """,
    "host_secrets": """
        import os
        leaked = {k for k, v in os.environ.items() if "host-secret" in v}
        if leaked or os.environ.get("AWS_SECRET_ACCESS_KEY") != "testing":
            found.append(f"env {sorted(leaked)}")
        for p in (SECRET_FILE, "/root/.aws/credentials", os.path.expanduser("~/.aws/credentials")):
            try:
                found.append(f"read {p}: {open(p).read()[:20]}")
            except OSError:
                pass
        """,
    "harness_process": """
        import os
        ppid = os.getppid()
        for what in ("fd/0", "fd/1", "mem", "environ"):
            try:
                open(f"/proc/{ppid}/{what}", "rb" if what != "fd/1" else "ab").close()
                found.append(f"opened harness {what}")
            except OSError:
                pass
        """,
    "moto_admin_api": """
        import os, urllib.request, urllib.error
        url = os.environ["AWS_ENDPOINT_URL"] + "/moto-api/reset"
        try:
            urllib.request.urlopen(urllib.request.Request(url, method="POST"), timeout=5)
            found.append("moto-api reset allowed")
        except urllib.error.HTTPError as e:
            if e.code != 403:
                found.append(f"moto-api answered {e.code}")
        """,
}
PROBE_TASK = _task(
    {
        "services": ["s3"],
        "initial_state": {"buckets": {"probe": {"seeded.txt": "seed"}}},
        "expected_state": {"objects": {"probe": {"found.txt": "", "seeded.txt": "seed"}}},
        "timeout_s": 30,
    }
)


@pytest.mark.parametrize("probe", sorted(PROBES))
def test_hostile_probe_finds_nothing(
    api_verifier: ApiVerifier, probe: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = tmp_path / "credentials"
    secret.write_text("[default]\naws_secret_access_key = host-secret\n")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "host-secret")
    body = textwrap.indent(textwrap.dedent(PROBES[probe]), "    ")
    sol = (
        "import boto3, botocore.config, botocore.exceptions\n"
        f"SECRET_FILE = {str(secret)!r}\nfound = []\ntry:\n{body}\n"
        "finally:\n"
        '    boto3.client("s3").put_object(Bucket="probe", Key="found.txt", '
        'Body="; ".join(found).encode())\n'
    )
    v = api_verifier.verify(PROBE_TASK, sol)
    assert v.status == "pass", v.detail


FORGERS = {
    "local_file": """
        import os
        os.makedirs("greetings", exist_ok=True)
        open("greetings/hello.txt", "w").write("hello, world")
        open("hello.txt", "w").write("hello, world")
        """,
    "fake_result_lines": """
        import json
        state = {"s3": {"buckets": {"greetings": {"hello.txt": {"sha256": "x"}}}}}
        for ev in ("ready", "result"):
            print(json.dumps({"nonce": "", "event": ev, "state": state}), flush=True)
        print("1 checks passed")
        """,
    "harness_stdout": """
        import os
        try:
            with open(f"/proc/{os.getppid()}/fd/1", "w") as f:
                f.write('{"event": "result", "state": {}}\\n')
        except OSError:
            pass
        """,
    "kill_harness": """
        import os, signal
        os.kill(os.getppid(), signal.SIGKILL)
        """,
}


@pytest.mark.parametrize("forger", sorted(FORGERS))
def test_forging_state_outside_the_api_does_not_pass(
    api_verifier: ApiVerifier, forger: str
) -> None:
    v = api_verifier.verify(HELLO, textwrap.dedent(FORGERS[forger]))
    assert v.status in ("fail", "error"), v.detail


def test_received_but_undeleted_messages_still_count() -> None:
    spec = TASKS["api.drain_signups"].verifier
    assert isinstance(spec, ApiSpec)
    state = {"sqs": {"queues": {"signups": {"messages": [], "hidden": 6}}}}
    (check,) = [c for c in compare(spec, state) if c.name == "queue signups"]
    assert not check.passed and "in flight" in check.detail


def test_receive_without_delete_fails_drain(api_verifier: ApiVerifier) -> None:
    sol = textwrap.dedent(
        """
        import boto3
        sqs = boto3.client("sqs")
        url = sqs.get_queue_url(QueueName="signups")["QueueUrl"]
        while sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages"):
            pass
        """
    )
    v = api_verifier.verify(TASKS["api.drain_signups"], sol)
    by_name = {c.name: c for c in v.checks}
    assert not by_name["queue signups"].passed


# ---------------------------------------------------------------- comparison rules
def _queue_spec(order_insensitive: bool) -> ApiSpec:
    spec = _task(
        {
            "services": ["sqs", "logs"],
            "expected_state": {
                "queue_messages": {"q": ["a", "b", "b"]},
                "log_events": {"/g": ["x", "y"]},
                "order_insensitive": order_insensitive,
            },
        }
    ).verifier
    assert isinstance(spec, ApiSpec)
    return spec


def _state(msgs: list[str], events: list[str]) -> dict[str, Any]:
    return {
        "sqs": {"queues": {"q": {"messages": msgs, "hidden": 0}}},
        "logs": {"groups": {"/g": {"messages": events}}},
    }


@pytest.mark.parametrize(
    ("order_insensitive", "msgs", "events", "expected"),
    [
        (True, ["b", "a", "b"], ["y", "x"], [True, True]),
        (False, ["b", "a", "b"], ["y", "x"], [False, False]),
        (False, ["a", "b", "b"], ["x", "y"], [True, True]),
        (True, ["a", "b"], ["x", "y", "y"], [False, False]),  # multiset, not set
    ],
)
def test_order_insensitive_comparison(
    order_insensitive: bool, msgs: list[str], events: list[str], expected: list[bool]
) -> None:
    checks = compare(_queue_spec(order_insensitive), _state(msgs, events))
    assert [c.passed for c in checks] == expected


def test_order_sensitive_task_in_sandbox(api_verifier: ApiVerifier) -> None:
    task = _task(
        {
            "services": ["sqs"],
            "initial_state": {"queues": ["q"]},
            "expected_state": {"queue_messages": {"q": ["1", "2"]}, "order_insensitive": False},
        }
    )
    send = (
        'import boto3\nsqs = boto3.client("sqs")\n'
        'u = sqs.get_queue_url(QueueName="q")["QueueUrl"]\n'
    )
    ok = api_verifier.verify(
        task, send + 'for b in "12": sqs.send_message(QueueUrl=u, MessageBody=b)\n'
    )
    bad = api_verifier.verify(
        task, send + 'for b in "21": sqs.send_message(QueueUrl=u, MessageBody=b)\n'
    )
    assert (ok.status, bad.status) == ("pass", "fail")


# ---------------------------------------------------------------- environment failures
@pytest.mark.parametrize("warm", [True, False])
def test_missing_moto_is_infra_error(
    api_verifier: ApiVerifier, monkeypatch: pytest.MonkeyPatch, warm: bool
) -> None:
    monkeypatch.setattr(api_mod, "site_paths", lambda sandbox: ["/nonexistent-site"])
    v = ApiVerifier(api_verifier.sandbox, warm=warm).verify(HELLO, PUT_HELLO)
    assert v.status == "infra_error"
    assert "moto" in v.detail


def test_wrong_family_is_infra_error(api_verifier: ApiVerifier) -> None:
    code = TaskRecord.model_validate(
        {
            "id": "c",
            "family": "code",
            "prompt": "p",
            "verifier": {
                "family": "code",
                "style": "asserts",
                "entry_point": "f",
                "asserts": ["f"],
            },
            "reference_solution": "",
        }
    )
    assert api_verifier.verify(code, "").status == "infra_error"
