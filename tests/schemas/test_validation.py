"""validate_record: pydantic errors become Problems with dotted field paths."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from tasksieve.schemas.task import TaskRecord
from tasksieve.schemas.validation import Problem, field_path, validate_record


@pytest.fixture
def code_task() -> dict[str, Any]:
    """A minimal valid code task (style asserts)."""
    return {
        "id": "t1",
        "family": "code",
        "prompt": "Write f() returning 1.",
        "verifier": {
            "family": "code",
            "style": "asserts",
            "entry_point": "f",
            "asserts": ["assert f() == 1"],
        },
        "reference_solution": "def f():\n    return 1\n",
    }


def test_valid_record_gives_task_and_no_problems(code_task: dict[str, Any]) -> None:
    task, problems = validate_record("a.jsonl", 3, code_task)
    assert isinstance(task, TaskRecord)
    assert task.id == "t1"
    assert problems == []


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(d: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = d
        for p in parents:
            node = node[int(p)] if isinstance(node, list) else node[p]
        node[last] = value

    return mutate


def _delete(path: str) -> Callable[[dict[str, Any]], None]:
    def mutate(d: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = d
        for p in parents:
            node = node[p]
        del node[last]

    return mutate


def _both(*mutators: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    def mutate(d: dict[str, Any]) -> None:
        for m in mutators:
            m(d)

    return mutate


IO_SPEC = {"family": "code", "style": "io", "io_cases": [{"stdin": "1"}]}
CONFIG_SPEC = {
    "family": "config",
    "schema_kind": "kubernetes",
    "kubernetes_version": "1.29",
    "policies": [{"id": "p1", "op": "exists"}],
}


@pytest.mark.parametrize(
    ("mutate", "field", "message"),
    [
        (_delete("prompt"), "prompt", "Field required"),
        (_set("prompt", ""), "prompt", "String should have at least 1 character"),
        (
            _set("reference_solution", 1),
            "reference_solution",
            "Input should be a valid string (got number 1)",
        ),
        (_set("id", "has space"), "id", "String should match pattern"),
        (_set("extra", 1), "extra", "Extra inputs are not permitted"),
        (_set("metadata", "k=1"), "metadata", 'valid dictionary (got string "k=1")'),
        (_set("tags", "a,b"), "tags", 'Input should be a valid list (got string "a,b")'),
        (_set("verifier", IO_SPEC), "verifier.io_cases.0.stdout", "Field required"),
        (
            _set("verifier.asserts", []),
            "verifier",
            "style 'asserts' needs a non-empty asserts list",
        ),
        (_set("verifier.style", "nope"), "verifier.style", "Input should be 'check', 'asserts'"),
        (_set("verifier.timeout_s", 0), "verifier.timeout_s", "Input should be greater than 0"),
        (_set("verifier.family", "sql"), "verifier.setup_sql", "Field required"),
        (
            _set("verifier.family", "nope"),
            "verifier.family",
            "Input tag 'nope' found using 'family'",
        ),
        (_delete("verifier.family"), "verifier.family", "Field required"),
        (_set("family", "sql"), "-", "verifier.family 'code' does not match family 'sql'"),
        (
            _both(_set("family", "config"), _set("verifier", CONFIG_SPEC)),
            "verifier.policies.0.path",
            "Field required",
        ),
        (_set("verifier", [1]), "verifier", "(got array)"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_schema_errors_become_problems_with_dotted_fields(
    code_task: dict[str, Any], mutate: Callable[[dict[str, Any]], None], field: str, message: str
) -> None:
    mutate(code_task)
    task, problems = validate_record("a.jsonl", 7, code_task)
    assert task is None
    assert field in [p.field for p in problems], problems
    (problem,) = [p for p in problems if p.field == field]
    assert problem.message.startswith(message) or message in problem.message, problem.message
    assert (problem.path, problem.line, problem.task_id) == ("a.jsonl", 7, code_task["id"])


def test_one_problem_per_error(code_task: dict[str, Any]) -> None:
    del code_task["prompt"]
    code_task["reference_solution"] = None
    _, problems = validate_record("a.jsonl", 1, code_task)
    assert sorted(p.field for p in problems) == ["prompt", "reference_solution"]


def test_parse_error_is_a_whole_record_problem() -> None:
    error = "invalid JSON: Expecting value at column 1"
    task, problems = validate_record("a.jsonl", 4, None, error)
    assert task is None
    assert [p.format() for p in problems] == [
        "a.jsonl:4: -: -: invalid JSON: Expecting value at column 1"
    ]


def test_problem_format() -> None:
    p = Problem("d/a.jsonl", 12, "t9", "verifier.io_cases.0.stdout", "Field required")
    assert p.format() == "d/a.jsonl:12: t9: verifier.io_cases.0.stdout: Field required"


@pytest.mark.parametrize(
    ("rid", "shown"),
    [(None, "-"), (5, "-"), ("", "-"), ("a\nb", "a\\nb"), ("x" * 300, "x" * 120 + "...")],
)
def test_task_id_is_shown_safely(code_task: dict[str, Any], rid: Any, shown: str) -> None:
    code_task["id"] = rid
    _, problems = validate_record("a.jsonl", 1, code_task)
    assert problems and {p.task_id for p in problems} == {shown}


def test_verifier_given_as_json_text_is_decoded(code_task: dict[str, Any]) -> None:
    code_task["verifier"] = json.dumps(code_task["verifier"])
    task, problems = validate_record("a.parquet", 1, code_task)
    assert problems == [] and task is not None and task.verifier.family == "code"


def test_verifier_text_that_is_not_json_says_so(code_task: dict[str, Any]) -> None:
    code_task["verifier"] = "{not json"
    _, problems = validate_record("a.parquet", 1, code_task)
    assert [(p.field, p.message) for p in problems] == [
        (
            "verifier",
            "verifier is text but not valid JSON: "
            "Expecting property name enclosed in double quotes at column 2",
        )
    ]


def test_field_path_keeps_a_real_key_that_equals_the_family() -> None:
    data = {"metadata": {"code": 1, "family": "code"}}
    assert field_path(("metadata", "code"), data) == "metadata.code"
    assert field_path(("verifier", "code", "style"), {"verifier": {"family": "code"}}) == (
        "verifier.style"
    )
    assert field_path((), data) == "-"


def test_input_is_not_mutated(code_task: dict[str, Any]) -> None:
    code_task["verifier"] = json.dumps(code_task["verifier"])
    before = copy.deepcopy(code_task)
    validate_record("a.jsonl", 1, code_task)
    assert code_task == before
