"""The API family's own warm fork server (``Sandbox.dedicated``, the harness's ``preload``).

What it must keep: the same verdicts as the cold harness, the common fork server's heap free of
moto, nothing read from where a candidate writes, a heap that forks cleanly (no thread, the
server's environment and path as they were), and siblings that end with their sandbox.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import tasksieve.verifiers.sandbox.process.sandbox as sandbox_mod
from tasksieve.schemas import TaskRecord
from tasksieve.transforms.samplers import extract_solution
from tasksieve.verifiers.families.api.verifier import ApiVerifier
from tasksieve.verifiers.sandbox.base import Limits, Sandbox
from tasksieve.verifiers.sandbox.process.sandbox import ProcessSandbox

ROOT = Path(__file__).resolve().parents[2]
TASKS = [
    TaskRecord.model_validate_json(line)
    for line in (ROOT / "examples/tasks/api.jsonl").read_text().splitlines()
    if line.strip()
]
LIMITS = Limits(wall_s=30, cpu_s=20)
MODULES = "import sys; print('moto' in sys.modules, 'boto3' in sys.modules)"


@pytest.fixture(scope="module")
def sandbox() -> Iterator[ProcessSandbox]:
    sb = ProcessSandbox()
    yield sb
    sb.close()


@pytest.fixture(scope="module")
def warm(sandbox: ProcessSandbox) -> ApiVerifier:
    v = ApiVerifier(sandbox)
    if v.runner is sandbox:
        pytest.skip(f"no fork server here: {sandbox.warm_unavailable}")
    return v


def _replays(tid: str) -> list[str]:
    lines = (ROOT / "examples/replay/completions.jsonl").read_text().splitlines()
    return [
        extract_solution(c["completion"], "api")
        for c in map(json.loads, lines)
        if c["task_id"] == tid
    ]


def _key(v: Any) -> tuple[Any, ...]:
    return v.status, v.tests_passed, v.tests_total, v.limit_hit


def test_the_family_runs_on_a_server_of_its_own(sandbox: ProcessSandbox, warm: ApiVerifier) -> None:
    assert warm.runner is sandbox.dedicated(warm.source)  # built once, then reused
    assert ApiVerifier(sandbox).runner is warm.runner  # the differ's verifiers share it
    common = sandbox.run({}, [sandbox.python, "-I", "-S", "-c", MODULES], LIMITS)
    own = warm.runner.run({}, [sandbox.python, "-I", "-S", "-c", MODULES], LIMITS)
    assert common.stdout.split() == [b"False", b"False"], common  # code runs fork a small heap
    assert own.stdout.split() == [b"True", b"True"], own


@pytest.mark.parametrize("task", TASKS[:3], ids=lambda t: t.id)
def test_warm_and_cold_runs_give_the_same_verdicts(
    sandbox: ProcessSandbox, warm: ApiVerifier, task: TaskRecord
) -> None:
    cold = ApiVerifier(sandbox, warm=False)
    assert cold.runner is sandbox
    for sol in [task.reference_solution, *_replays(task.id)[:2]]:
        assert _key(warm.verify(task, sol)) == _key(cold.verify(task, sol))


# The program writes the right object with its own client, then plants broken botocore models
# and an AWS config wherever a harness could look for them (its scratch dir, /tmp, its HOME).
PLANTER = """
import os, boto3
boto3.client("s3").put_object(Bucket="greetings", Key="hello.txt", Body=b"hello, world")
broken = "{ not json"
versions = {"s3": "2006-03-01", "sqs": "2012-11-05", "logs": "2014-03-28"}
kinds = ("service-2", "paginators-1", "waiters-2", "endpoint-rule-set-1")
for root in {"/tmp", os.getcwd(), os.path.expanduser("~")}:
    models = os.path.join(root, ".aws", "models")
    for svc, ver in versions.items():
        os.makedirs(os.path.join(models, svc, ver), exist_ok=True)
        for kind in kinds:
            open(os.path.join(models, svc, ver, kind + ".json"), "w").write(broken)
    for name in ("endpoints", "partitions", "_retry", "sdk-default-configuration"):
        open(os.path.join(models, name + ".json"), "w").write(broken)
    with open(os.path.join(root, ".aws", "config"), "w") as f:
        f.write("[default]\\nendpoint_url = http://10.255.255.1:9\\nregion = nowhere-1\\n")
"""
HELLO = TaskRecord.model_validate(
    {
        "id": "api.plant",
        "family": "api",
        "prompt": "test",
        "verifier": {
            "family": "api",
            "services": ["s3", "sqs", "logs"],
            "initial_state": {"buckets": {"greetings": {}}, "queues": ["q"], "log_groups": ["g"]},
            "expected_state": {"objects": {"greetings": {"hello.txt": "hello, world"}}},
            "timeout_s": 20,
        },
        "reference_solution": "",
    }
)


@pytest.mark.parametrize("is_warm", [True, False])
def test_models_a_candidate_plants_are_never_read(
    sandbox: ProcessSandbox, warm: ApiVerifier, is_warm: bool
) -> None:
    v = warm if is_warm else ApiVerifier(sandbox, warm=False)
    out = v.verify_detailed(HELLO, textwrap.dedent(PLANTER))
    assert out.verdict.status == "pass", out.verdict.detail
    assert set(out.state) >= {"s3", "sqs", "logs"}  # every service was read back


# Run in a fresh interpreter: importing moto here would register its hooks in the test process.
PRELOAD_CHECK = """
import json, os, sys, threading
from botocore import loaders  # imported under HOME=/tmp, as it would be in the server
from tasksieve.verifiers.families.api.guest import harness
path, env, threads = list(sys.path), dict(os.environ), threading.active_count()
harness.preload(["/nonexistent-site"])
print(json.dumps({
    "same": (list(sys.path), dict(os.environ), threading.active_count()) == (path, env, threads),
    "warm": sorted(harness.WARM),
    "data": sorted(os.path.realpath(p) for p in harness.WARM["loader"].search_paths),
    "user": loaders.Loader.CUSTOMER_DATA_PATH,
    "randoms": sorted(type(r).__name__ for r in harness.WARM["randoms"]),
}))
"""


def test_preload_leaves_a_forkable_heap_and_reads_no_user_path() -> None:
    env = {**os.environ, "HOME": "/tmp"}  # the fork server's HOME: a run's scratch
    out = subprocess.run(
        [sys.executable, "-c", PRELOAD_CHECK], env=env, capture_output=True, text=True, check=True
    )
    got = json.loads(out.stdout)
    assert got["same"], "preload changed sys.path, the environment or started a thread"
    assert got["warm"] == ["app", "loader", "randoms"]
    assert "MotoRandom" in got["randoms"], got  # reseeded in every run
    assert all(p.endswith(("/botocore/data", "/boto3/data")) for p in got["data"]), got
    assert got["user"].startswith("/proc/nonexistent/"), got


def test_backends_without_a_server_of_their_own_run_it_cold() -> None:
    class Plain(Sandbox):
        def run(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    plain = Plain()
    assert plain.dedicated("print(1)") is plain
    sb = ProcessSandbox(warm=False)
    assert sb.dedicated("print(1)") is sb
    assert ApiVerifier(sb).runner is sb


def test_a_sibling_ends_with_its_sandbox() -> None:
    sb = ProcessSandbox()
    src = (
        'if __name__ == "__warm__":\n    WARMED = True\n\n\n'
        'def warm_main():\n    print("warm", globals().get("WARMED", False))\n\n\n'
        'if __name__ == "__main__":\n    print("cold")\n'
    )
    sib = sb.dedicated(src)
    if sib is sb:
        sb.close()
        pytest.skip(f"no fork server here: {sb.warm_unavailable}")
    cmd = [sb.python, "-I", "-S", "s.py"]
    assert sib.run({"s.py": src}, cmd, LIMITS).stdout.strip() == b"warm True"
    assert sb.run({"s.py": src}, cmd, LIMITS).stdout.strip() == b"cold"
    slow = sib.spawn({}, [sb.python, "-I", "-S", "-c", "import time; time.sleep(60)"], LIMITS)
    try:
        sb.close()
        assert slow.popen.wait(10.0) is not None  # the sibling's server went with its runs
    finally:
        slow.close()


IDS = TaskRecord.model_validate(
    {
        "id": "api.ids",
        "family": "api",
        "prompt": "test",
        "verifier": {
            "family": "api",
            "services": ["sqs"],
            "initial_state": {"queues": ["q"]},
            "expected_state": {"queue_messages": {"q": ["x"]}},
            "timeout_s": 20,
        },
        "reference_solution": "",
    }
)
SHOW_ID = (
    "import boto3\nsqs = boto3.client('sqs')\n"
    "url = sqs.get_queue_url(QueueName='q')['QueueUrl']\n"
    "print(sqs.send_message(QueueUrl=url, MessageBody='x')['MessageId'])\n"
)


def test_every_warm_run_draws_its_own_ids(warm: ApiVerifier) -> None:
    # moto makes ids from a generator of its own, copied into every run from the warm heap
    outs = [warm.verify_detailed(IDS, SHOW_ID) for _ in range(2)]
    assert [o.verdict.status for o in outs] == ["pass", "pass"], outs[0].verdict.detail
    first, second = (o.candidate["stdout_tail"].strip() for o in outs)
    assert first and first != second


def test_a_sibling_that_cannot_start_leaves_its_runs_cold(
    sandbox: ProcessSandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(**kwargs: Any) -> ProcessSandbox:
        raise OSError("no room for another server")

    said: list[str] = []  # the logger itself: other tests' CLI runs reconfigure logging
    monkeypatch.setattr(sandbox_mod.log, "warning", lambda msg, *a: said.append(msg % a))
    monkeypatch.setattr(sandbox_mod, "ProcessSandbox", broken)
    assert sandbox.dedicated("print('never warm')") is sandbox
    assert said == [
        "a dedicated fork server did not start (no room for another server); its runs run cold"
    ]


def test_a_sandbox_builds_a_bounded_number_of_siblings(
    sandbox: ProcessSandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sandbox_mod, "MAX_DEDICATED", len(sandbox._dedicated))
    assert sandbox.dedicated("print('one more')") is sandbox
