"""The committed JSON Schemas match the pydantic models; Arrow schemas carry the version."""

from __future__ import annotations

import json

import pytest

from tasksieve.schemas import SCHEMA_VERSION, TaskRecord
from tasksieve.schemas.arrow import REJECTED_SCHEMA, ROLLOUTS_SCHEMA, TASKS_SCHEMA
from tasksieve.schemas.export import EXPORTS, HERE, render


@pytest.mark.parametrize("name", sorted(EXPORTS))
def test_committed_json_schema_is_fresh(name: str) -> None:
    committed = (HERE / name).read_text(encoding="utf-8")
    assert committed == render(EXPORTS[name]), (
        f"run `python -m tasksieve.schemas.export` ({name} stale)"
    )


@pytest.mark.parametrize("schema", [TASKS_SCHEMA, ROLLOUTS_SCHEMA, REJECTED_SCHEMA])
def test_arrow_schema_carries_version(schema) -> None:
    assert schema.metadata[b"schema_version"] == SCHEMA_VERSION.encode()


def test_task_schema_validates_a_record_with_jsonschema() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    doc = json.loads((HERE / "task.schema.json").read_text())
    rec = {
        "id": "t1",
        "family": "code",
        "prompt": "Write add(a, b).",
        "verifier": {
            "family": "code",
            "style": "asserts",
            "entry_point": "add",
            "asserts": ["assert add(1, 2) == 3"],
        },
        "reference_solution": "def add(a, b):\n    return a + b\n",
    }
    jsonschema.validate(rec, doc)
    TaskRecord.model_validate(rec)


def test_family_mismatch_is_rejected() -> None:
    with pytest.raises(ValueError, match="does not match family"):
        TaskRecord.model_validate(
            {
                "id": "t1",
                "family": "sql",
                "prompt": "p",
                "verifier": {
                    "family": "code",
                    "style": "asserts",
                    "entry_point": "f",
                    "asserts": ["assert f()"],
                },
                "reference_solution": "",
            }
        )
