"""No silent type coercion: every scalar field of every family's spec refuses other JSON types.

The cases are derived from the models themselves (every str, int, float, bool and Literal
field, and the items/values of list and dict fields of those), placed at their location in a
minimal valid record of their family, so a field added later is covered without editing here.
"""

from __future__ import annotations

import copy
import itertools
import json
import types
import typing
from typing import Any, Literal, Union, get_args, get_origin

import pytest
from pydantic import BaseModel

from tasksieve.schemas.export import HERE
from tasksieve.schemas.task import (
    ApiExpectedState,
    ApiInitialState,
    ApiSpec,
    CodeSpec,
    ConfigSpec,
    IOCase,
    PolicyCheck,
    SourceInfo,
    SqlCompare,
    SqlSpec,
    TaskRecord,
)
from tasksieve.schemas.validation import validate_record

CODE = {
    "id": "t.code",
    "family": "code",
    "prompt": "Write f() returning 1.",
    "verifier": {
        "family": "code",
        "style": "asserts",
        "entry_point": "f",
        "asserts": ["assert f() == 1"],
        "test_code": "def check(c):\n    assert c() == 1\n",
        "setup_code": "import math",
    },
    "reference_solution": "def f():\n    return 1\n",
    "source": {"dataset": "d", "license": "MIT", "url": "https://x", "author": "a"},
    "tags": ["t"],
}
CODE_IO = {
    **CODE,
    "verifier": {"family": "code", "style": "io", "io_cases": [{"stdin": "1", "stdout": "1"}]},
}
SQL = {
    "id": "t.sql",
    "family": "sql",
    "prompt": "Count the rows.",
    "verifier": {
        "family": "sql",
        "setup_sql": "CREATE TABLE t (a INTEGER);",
        "files": {"a.csv": "a\n1\n"},
        "reference_query": "SELECT count(*) FROM t",
        "expected_columns": ["n"],
        "compare": {},
    },
    "reference_solution": "SELECT count(*) FROM t",
}
API = {
    "id": "t.api",
    "family": "api",
    "prompt": "Put an object.",
    "verifier": {
        "family": "api",
        "services": ["s3"],
        "initial_state": {
            "buckets": {"b": {"k": "v"}},
            "queues": ["q"],
            "queue_messages": {"q": ["m"]},
            "log_groups": ["g"],
        },
        "expected_state": {
            "objects": {"b": {"k": "v"}},
            "absent_objects": {"b": ["x"]},
            "queue_messages": {"q": ["m"]},
            "log_events": {"g": ["e"]},
        },
    },
    "reference_solution": "import boto3\n",
}
CONFIG = {
    "id": "t.config",
    "family": "config",
    "prompt": "Write a pod.",
    "verifier": {
        "family": "config",
        "schema_kind": "kubernetes",
        "kubernetes_version": "1.29",
        "policies": [
            {"id": "p", "description": "d", "kinds": ["Pod"], "path": "kind", "op": "exists"}
        ],
    },
    "reference_solution": "kind: Pod\n",
}

# model -> (base record, dotted path of the model inside it)
LOCATIONS: list[tuple[type[BaseModel], dict[str, Any], str]] = [
    *((TaskRecord, base, "") for base in (CODE, SQL, API, CONFIG)),
    *((SourceInfo, base, "source") for base in (CODE, SQL, API, CONFIG)),
    (CodeSpec, CODE, "verifier"),
    (IOCase, CODE_IO, "verifier.io_cases.0"),
    (SqlSpec, SQL, "verifier"),
    (SqlCompare, SQL, "verifier.compare"),
    (ApiSpec, API, "verifier"),
    (ApiInitialState, API, "verifier.initial_state"),
    (ApiExpectedState, API, "verifier.expected_state"),
    (ConfigSpec, CONFIG, "verifier"),
    (PolicyCheck, CONFIG, "verifier.policies.0"),
]

WRONG: dict[str, list[Any]] = {
    "float": ["600", "1e1", "", True, False],
    "int": ["512", 512.5, True, "0x200", 1e-3],
    "bool": ["true", "false", 1, 0, 1.0, "yes"],
    "str": [5, 1.5, True],
    "literal": [5, True],
}
EXPECTED = {
    "float": "Input should be a valid number",
    "int": "Input should be a valid integer",
    "bool": "Input should be a valid boolean",
    "str": "Input should be a valid string",
    "literal": "Input should be '",
}


def _scalar_kind(tp: Any) -> str | None:
    """'str', 'int', 'float', 'bool' or 'literal' for a scalar annotation, else None."""
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        return _scalar_kind(args[0]) if len(args) == 1 else None
    if origin is typing.Annotated:
        return _scalar_kind(get_args(tp)[0])
    if origin is Literal:
        return "literal"
    return {str: "str", int: "int", float: "float", bool: "bool"}.get(tp)


def _slots(model: type[BaseModel]) -> list[tuple[str, str]]:
    """(field suffix, kind) for every scalar slot of the model's own fields.

    A list field gives its first item (``name.0``), a dict field one value (``name.key``), a
    dict of dicts one inner value; nested models are covered by their own location.
    """
    hints = typing.get_type_hints(model, include_extras=True)
    out: list[tuple[str, str]] = []
    for name in model.model_fields:
        if name == "family" and model is not TaskRecord:
            continue  # the union discriminator: a wrong value is a tag error, tested elsewhere
        tp = hints[name]
        kind = _scalar_kind(tp)
        if kind is not None:
            out.append((name, kind))
            continue
        origin, args = get_origin(tp), get_args(tp)
        if origin in (Union, types.UnionType):
            inner = [a for a in args if a is not type(None)]
            if len(inner) == 1:
                origin, args = get_origin(inner[0]), get_args(inner[0])
        if origin is list and _scalar_kind(args[0]):
            out.append((f"{name}.0", _scalar_kind(args[0]) or ""))
        elif origin is dict:
            value = args[1]
            if _scalar_kind(value):
                out.append((f"{name}.key", _scalar_kind(value) or ""))
            elif get_origin(value) is dict and _scalar_kind(get_args(value)[1]):
                out.append((f"{name}.key.inner", _scalar_kind(get_args(value)[1]) or ""))
            elif get_origin(value) is list and _scalar_kind(get_args(value)[0]):
                out.append((f"{name}.key.0", _scalar_kind(get_args(value)[0]) or ""))
    return out


def _cases() -> list[Any]:
    cases = []
    for model, base, prefix in LOCATIONS:
        for suffix, kind in _slots(model):
            field = f"{prefix}.{suffix}" if prefix else suffix
            for value in WRONG[kind]:
                case_id = f"{base['family']}:{field}={value!r}"
                cases.append(pytest.param(base, field, kind, value, id=case_id))
    return cases


def _put(record: dict[str, Any], field: str, value: Any) -> dict[str, Any]:
    """A copy of ``record`` with ``value`` at dotted ``field`` (missing objects are created)."""
    out = copy.deepcopy(record)
    steps = field.split(".")
    node: Any = out
    for step, after in itertools.pairwise(steps):
        if isinstance(node, list):
            node = node[int(step)]
        else:
            node = node.setdefault(step, [] if after.isdigit() else {})
    last = steps[-1]
    if isinstance(node, list) and int(last) == len(node):
        node.append(value)
    elif isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return out


CASES = _cases()


def test_every_family_and_kind_has_cases() -> None:
    seen = {(c.values[0]["family"], c.values[2]) for c in CASES}
    for family in ("code", "sql", "api", "config"):
        assert {(family, k) for k in ("str", "literal")} <= seen
    assert {k for _, k in seen} == set(WRONG)
    fields = {c.values[1] for c in CASES}
    assert {"verifier.timeout_s", "verifier.memory_mb", "verifier.perturb"} <= fields
    assert {"verifier.compare.float_tol", "verifier.max_depth", "source.url"} <= fields


@pytest.mark.parametrize("base", [CODE, CODE_IO, SQL, API, CONFIG], ids=lambda b: b["id"])
def test_bases_are_valid(base: dict[str, Any]) -> None:
    task, problems = validate_record("a.jsonl", 1, base)
    assert task is not None, problems


@pytest.mark.parametrize(("base", "field", "kind", "value"), CASES)
def test_wrong_json_type_is_refused_with_file_line_id_field_given_expected(
    base: dict[str, Any], field: str, kind: str, value: Any
) -> None:
    task, problems = validate_record("in/a.jsonl", 7, _put(base, field, value))
    assert task is None
    mine = [p for p in problems if p.field == field]
    assert len(mine) == 1, problems
    text = mine[0].format()
    shown_id = "-" if field == "id" else base["id"]  # an id that is not a string is not shown
    assert text.startswith(f"in/a.jsonl:7: {shown_id}: {field}: "), text
    assert EXPECTED[kind] in text, text
    given = {str: "string", bool: "boolean", int: "number", float: "number"}[type(value)]
    assert f"(got {given} {json.dumps(value)})" in text, text


def _allowed() -> list[Any]:
    cases = []
    for model, base, prefix in LOCATIONS:
        for suffix, kind in _slots(model):
            field = f"{prefix}.{suffix}" if prefix else suffix
            if kind == "float":
                cases.append(pytest.param(base, field, 3, 3.0, id=f"{field}=int"))
            elif kind == "int":
                cases.append(pytest.param(base, field, 1024.0, 1024, id=f"{field}=whole float"))
    return cases


def _get(task: TaskRecord, field: str) -> Any:
    node: Any = task.model_dump()
    for step in field.split("."):
        node = node[int(step)] if isinstance(node, list) else node[step]
    return node


@pytest.mark.parametrize(("base", "field", "given", "stored"), _allowed())
def test_lossless_number_forms_are_accepted(
    base: dict[str, Any], field: str, given: Any, stored: Any
) -> None:
    task, problems = validate_record("a.jsonl", 1, _put(base, field, given))
    assert task is not None, problems
    value = _get(task, field)
    assert value == stored and type(value) is type(stored)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("verifier.timeout_s", float("nan")),
        ("verifier.timeout_s", float("inf")),
        ("verifier.compare.float_tol", float("inf")),
        ("verifier.compare.float_tol", float("nan")),
        ("metadata.x", float("nan")),
        ("metadata.x", [1.0, {"y": float("-inf")}]),
    ],
)
def test_non_finite_numbers_are_refused(field: str, value: Any) -> None:
    base = SQL if "compare" in field else CODE
    task, problems = validate_record("a.jsonl", 1, _put(base, field, value))
    assert task is None
    assert any("finite number" in p.message for p in problems), problems


@pytest.fixture(scope="module")
def exported() -> Any:
    """A validator for the committed task.schema.json."""
    jsonschema = pytest.importorskip("jsonschema")
    doc = json.loads((HERE / "task.schema.json").read_text())
    return jsonschema.Draft202012Validator(doc)


@pytest.mark.parametrize(("base", "field", "kind", "value"), CASES)
def test_the_exported_json_schema_refuses_the_same_values(
    exported: Any, base: dict[str, Any], field: str, kind: str, value: Any
) -> None:
    assert exported.is_valid(base)
    assert not exported.is_valid(_put(base, field, value))
