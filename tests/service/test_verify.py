"""``POST /verify`` gives the verdict in-process verification gives, hostile answers included."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tasksieve.schemas import TaskRecord
from tasksieve.verifiers.registry import VerifierCache
from tasksieve.verifiers.sandbox.process.sandbox import ProcessSandbox
from tests.service.servers import Server

ROOT = Path(__file__).resolve().parents[2]
TASKS = ROOT / "examples" / "tasks"
SOLUTIONS = ROOT / "examples" / "solutions"
HOSTILE = SOLUTIONS / "hostile"


def task(task_id: str) -> TaskRecord:
    family = task_id.split(".")[0]
    for line in (TASKS / f"{family}.jsonl").read_text().splitlines():
        record = TaskRecord.model_validate_json(line)
        if record.id == task_id:
            return record
    raise KeyError(task_id)


ADD = TaskRecord.model_validate_json((SOLUTIONS / "add.task.json").read_text())
SQL, CONFIG, API = (
    task("sql.count_shipped"),
    task("config.k8s_deployment_limits"),
    task("api.s3_put_hello"),
)


def case(name: str, record: TaskRecord, solution: str, slow: bool = False) -> Any:
    """One parametrized case; ``slow``: the api family starts a mock cloud (~10 s each)."""
    return pytest.param(name, record, solution, id=name, marks=[pytest.mark.slow] if slow else [])


CASES = [
    case("add_good", ADD, (SOLUTIONS / "add_good.py").read_text()),
    case("add_wrong", ADD, (SOLUTIONS / "add_wrong.py").read_text()),
    case("add_empty", ADD, ""),
    case("sql_reference", SQL, SQL.reference_solution),
    case("config_reference", CONFIG, CONFIG.reference_solution),
    case("api_reference", API, API.reference_solution, slow=True),
    case("code_exit_before_tests", ADD, (HOSTILE / "code_exit_before_tests.py").read_text()),
    case("code_always_equal", ADD, (HOSTILE / "code_always_equal.py").read_text()),
    case("sql_read_host_file", SQL, (HOSTILE / "sql_read_host_file.sql").read_text()),
    case("config_python_tag", CONFIG, (HOSTILE / "config_python_tag.yaml").read_text()),
    case("api_real_endpoint", API, (HOSTILE / "api_real_endpoint.py").read_text(), slow=True),
]


@pytest.fixture(scope="module")
def local() -> Iterator[VerifierCache]:
    sandbox = ProcessSandbox()
    cache = VerifierCache(sandbox)
    yield cache
    cache.close()
    sandbox.close()


def comparable(verdict: dict[str, Any]) -> dict[str, Any]:
    """The verdict without its costs (wall and CPU time: the only fields that differ between
    two runs)."""
    return {k: v for k, v in verdict.items() if k not in ("duration_s", "cpu_s", "task_id")}


@pytest.mark.parametrize("name,record,solution", CASES)
def test_service_verdict_equals_in_process_verdict(
    server: Server, local: VerifierCache, name: str, record: TaskRecord, solution: str
) -> None:
    expected = local.get(record.family).verify(record, solution).model_dump()
    resp = server.post("/verify", {"task": record.model_dump(mode="json"), "solution": solution})
    assert resp.status_code == 200, resp.text
    got = resp.json()
    assert got["task_id"] == record.id
    assert comparable(got) == comparable(expected)
    if name.startswith(("code_", "sql_read", "config_python", "api_real")):
        assert got["status"] not in ("pass", "infra_error")  # hostile: contained, a verdict


def test_id_plus_spec_gets_the_whole_records_verdict(server: Server) -> None:
    solution = (SOLUTIONS / "add_wrong.py").read_text()
    whole = server.post("/verify", {"task": ADD.model_dump(mode="json"), "solution": solution})
    spec = {
        "task_id": ADD.id,
        "verifier": ADD.verifier.model_dump(mode="json"),
        "reference_solution": ADD.reference_solution,
        "solution": solution,
    }
    by_spec = server.post("/verify", spec)
    assert by_spec.status_code == 200, by_spec.text
    assert comparable(by_spec.json()) == comparable(whole.json())
    assert by_spec.json()["task_id"] == ADD.id


def test_trivial_solutions_are_the_family_verifiers(server: Server, local: VerifierCache) -> None:
    record = task("config.k8s_deployment_limits")
    resp = server.post("/trivial_solutions", {"task": record.model_dump(mode="json")})
    assert resp.json()["solutions"] == local.get("config").trivial_solutions(record)


@pytest.mark.parametrize(
    "body",
    [
        {"task": {"id": "x"}, "solution": ""},
        {"task": json.loads(ADD.model_dump_json()) | {"family": "cobol"}, "solution": ""},
        {"solution": "no task"},
        {"task_id": "code.add", "solution": "", "reference_solution": ""},
        {"task": {"id": "x"}, "task_id": "x", "solution": ""},
    ],
    ids=["not_a_task", "unknown_family", "missing_task", "id_without_spec", "both_forms"],
)
def test_bad_verify_requests_are_refused_before_running(server: Server, body: dict) -> None:
    resp = server.post("/verify", body)
    assert resp.status_code in (400, 422)
