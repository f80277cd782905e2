"""ExactDedup: a faithful prompt key, duplicates by prompt and spec, conflicts reported."""

from __future__ import annotations

from typing import Any

import apache_beam as beam
import pytest
from apache_beam.testing.test_pipeline import TestPipeline as BeamPipeline
from apache_beam.testing.util import assert_that, equal_to

from tasksieve.schemas import TaskRecord
from tasksieve.transforms.dedup.exact import ExactDedup, decide_group, prompt_key, prompt_text
from tasksieve.transforms.runtime.items import Item

CODE_SPEC: dict[str, Any] = {
    "family": "code",
    "style": "asserts",
    "entry_point": "f",
    "asserts": ["assert f(1) == 2"],
}
SQL_SPEC: dict[str, Any] = {
    "family": "sql",
    "setup_sql": "CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1), (2);",
    "reference_query": "SELECT x FROM t ORDER BY x",
    "expected_rows": [[1], [2]],
}
API_SPEC: dict[str, Any] = {
    "family": "api",
    "services": ["s3"],
    "initial_state": {"buckets": {"b": {}}},
    "expected_state": {"objects": {"b": {"k.txt": "hi"}}},
}
CONFIG_SPEC: dict[str, Any] = {
    "family": "config",
    "format": "json",
    "schema_kind": "jsonschema",
    "json_schema": {"type": "object", "required": ["port"]},
}


def item(
    ident: str,
    prompt: str,
    line: int,
    spec: dict[str, Any] = CODE_SPEC,
    file: str = "in.jsonl",
) -> Item:
    task = TaskRecord.model_validate(
        {
            "id": ident,
            "family": spec["family"],
            "prompt": prompt,
            "verifier": spec,
            "reference_solution": "x",
        }
    )
    return Item(task=task, source_file=file, source_line=line, input_sha256="x")


def split(items: list[Item]) -> tuple[list[Item], list[dict[str, Any]]]:
    """decide_group's kept items and rejection rows, the plain function the DoFn calls."""
    kept: list[Item] = []
    rows: list[dict[str, Any]] = []
    for out in decide_group(items, "run"):
        if isinstance(out, Item):
            kept.append(out)
        else:
            rows.append(out.value)
    return kept, rows


NEAR_MISSES = [
    ("Return the items with price > 10.", "Return the items with price < 10."),
    ("Keep rows where a == b.", "Keep rows where a != b."),
    ("Return every value above 10.", "Return every value above 100."),
    ("Return True when a and b hold.", "Return True when a and not b hold."),
    (
        "SELECT name FROM users ORDER BY age ASC LIMIT 3",
        "SELECT name FROM users ORDER BY age DESC LIMIT 3",
    ),
    ("Add 3 to each element.", "Add 4 to each element."),
    ("Round to 2.5 places.", "Round to 25 places."),
    (
        "Fix this:\n```python\ndef f(x):\n    return x + 1\n```",
        "Fix this:\n```python\ndef f(x):\n    return x - 1\n```",
    ),
    (
        "Explain:\n```python\nif a:\n    b()\n    c()\n```",
        "Explain:\n```python\nif a:\n    b()\nc()\n```",
    ),
    ("Find users named 'Alice'.", "Find users named 'alice'."),
    ("Compute x**2.", "Compute x*2."),
    ("Use the list [1, 2, 3].", "Use the list [1, 2][3]."),
]


@pytest.mark.parametrize(("a", "b"), NEAR_MISSES)
def test_near_miss_prompts_get_different_keys(a: str, b: str) -> None:
    assert prompt_key(item("a", a, 1)) != prompt_key(item("b", b, 2))


@pytest.mark.parametrize(("a", "b"), NEAR_MISSES)
def test_near_miss_prompts_with_same_spec_are_both_kept(a: str, b: str) -> None:
    with BeamPipeline() as p:
        out = p | beam.Create([item("a", a, 1), item("b", b, 2)]) | ExactDedup("run")
        assert_that(out["ok"] | beam.Map(lambda it: it.id), equal_to(["a", "b"]), label="ok")
        assert_that(out["rejected"], equal_to([]), label="rejected")


WHITESPACE_TWINS = [
    ("Write add(a, b).", "Write add(a, b).   "),
    ("Write add(a, b).", "\n\n  Write add(a, b).\n"),
    ("Write  add(a,\tb).", "Write add(a, b)."),
    ("line one\r\nline two", "line one\nline two"),
    ("para one\n\n\n\npara two", "para one\n\npara two"),
    ("code:\n    x = 1   \n    y = 2", "code:\n    x = 1\n    y = 2"),
    ("caf\u0065\u0301 menu", "caf\u00e9 menu"),
]


@pytest.mark.parametrize(("a", "b"), WHITESPACE_TWINS)
def test_whitespace_and_unicode_forms_fold(a: str, b: str) -> None:
    assert prompt_text(a) == prompt_text(b)


def test_indentation_is_kept() -> None:
    assert prompt_text("if a:\n    b") != prompt_text("if a:\nb")


@pytest.mark.parametrize(("a", "b"), WHITESPACE_TWINS)
def test_true_duplicate_keeps_earliest_and_names_it(a: str, b: str) -> None:
    kept, rows = split([item("later", a, 7), item("first", b, 3)])
    assert [it.id for it in kept] == ["first"]
    assert [(r["record_id"], r["reason"]) for r in rows] == [("later", "dedup.exact")]
    assert "first (in.jsonl:3)" in rows[0]["detail"]
    assert [f.other_id for f in kept[0].findings] == ["later"]


def test_survivor_order_is_file_then_line_then_id() -> None:
    kept, _ = split([item("z", "P", 1, file="b.jsonl"), item("y", "P", 9, file="a.jsonl")])
    assert [it.id for it in kept] == ["y"]


def test_same_prompt_in_another_family_is_not_a_duplicate() -> None:
    assert prompt_key(item("a", "Do it.", 1)) != prompt_key(item("b", "Do it.", 1, SQL_SPEC))


def _other(spec: dict[str, Any]) -> dict[str, Any]:
    """The spec with its tests changed (one field), per family."""
    changed = {
        "code": ("asserts", ["assert f(1) == 3"]),
        "sql": ("expected_rows", [[2], [1]]),
        "api": ("expected_state", {"objects": {"b": {"k.txt": "bye"}}}),
        "config": ("json_schema", {"type": "object", "required": ["host"]}),
    }
    key, value = changed[spec["family"]]
    return {**spec, key: value}


@pytest.mark.parametrize("spec", [CODE_SPEC, SQL_SPEC, API_SPEC, CONFIG_SPEC])
def test_same_prompt_different_tests_rejects_both_as_conflict(spec: dict[str, Any]) -> None:
    kept, rows = split(
        [item("a", "Same task.", 1, spec), item("b", "Same task. ", 2, _other(spec))]
    )
    assert kept == []
    assert sorted((r["record_id"], r["reason"]) for r in rows) == [
        ("a", "dedup.conflict"),
        ("b", "dedup.conflict"),
    ]
    field = next(k for k in _other(spec) if _other(spec)[k] != spec.get(k))
    by_id = {r["record_id"]: r["detail"] for r in rows}
    assert "b (in.jsonl:2)" in by_id["a"] and field in by_id["a"]
    assert "a (in.jsonl:1)" in by_id["b"] and field in by_id["b"]


def test_conflict_group_rejects_agreeing_members_too() -> None:
    group = [
        item("a", "T", 1),
        item("b", "T", 2),
        item("c", "T", 3, _other(CODE_SPEC)),
    ]
    kept, rows = split(group)
    assert kept == []
    detail = {r["record_id"]: r["detail"] for r in rows}
    assert set(detail) == {"a", "b", "c"}
    assert "b (in.jsonl:2): same verifier" in detail["a"]
    assert "c (in.jsonl:3): verifier asserts differ" in detail["a"]


def test_conflict_detail_caps_the_named_members() -> None:
    group = [item(f"t{i}", "T", i, {**CODE_SPEC, "asserts": [f"assert f({i})"]}) for i in range(9)]
    _, rows = split(group)
    assert all("and 3 more" in r["detail"] for r in rows)


def test_spec_defaults_written_out_are_the_same_spec() -> None:
    explicit = {**CODE_SPEC, "timeout_s": 10.0, "memory_mb": 512, "io_cases": []}
    kept, rows = split([item("a", "T", 1), item("b", "T", 2, explicit)])
    assert [it.id for it in kept] == ["a"] and rows[0]["reason"] == "dedup.exact"
