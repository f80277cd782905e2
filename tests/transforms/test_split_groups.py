"""Grouping only repeated keys: Validate and ExactDedup decide as if every record were grouped."""

from __future__ import annotations

import json
from typing import Any

import apache_beam as beam
from apache_beam.testing.test_pipeline import TestPipeline as BeamPipeline
from apache_beam.testing.util import assert_that, equal_to

from tasksieve.schemas import TaskRecord
from tasksieve.transforms.dedup.exact import ExactDedup
from tasksieve.transforms.runtime.items import Item
from tasksieve.transforms.runtime.split import GROUPED, SplitFn, repeated_keys


def _item(line: int, task_id: str, prompt: str, asserts: str = "assert f(1) == 1") -> Item:
    data: dict[str, Any] = {
        "id": task_id,
        "family": "code",
        "prompt": prompt,
        "verifier": {
            "family": "code",
            "style": "asserts",
            "entry_point": "f",
            "asserts": [asserts],
        },
        "reference_solution": "def f(x):\n    return x\n",
    }
    return Item(TaskRecord.model_validate(data), "in.jsonl", line, "x", raw=json.dumps(data))


def test_only_records_with_a_repeated_key_are_tagged_for_the_group() -> None:
    keys = ["a", "b", "a", "c", "a"]
    with BeamPipeline() as p:
        pc = p | beam.Create(keys)
        split = pc | beam.ParDo(
            SplitFn(str.upper), beam.pvalue.AsDict(repeated_keys(pc | beam.Map(str.upper), "K"))
        ).with_outputs(GROUPED, main="single")
        assert_that(split["single"], equal_to(["b", "c"]), label="single")
        assert_that(split[GROUPED], equal_to([("A", "a")] * 3), label="grouped")


_SINK: dict[str, list[str]] = {}


def _collect(x: str, name: str) -> None:
    _SINK[name].append(x)


def _outcome(items: list[Item], hint: list[Item] | None) -> tuple[list[str], list[str]]:
    """(kept ids with their findings, rejection rows) of ExactDedup with the given hint;
    module-level sinks survive the DoFn pickling."""
    _SINK.clear()
    _SINK.update(kept=[], rows=[])
    with beam.Pipeline() as p:
        pc = p | "Items" >> beam.Create(items)
        extra = None if hint is None else p | "Hint" >> beam.Create(hint)
        out = pc | ExactDedup("r", hint=extra)
        _ = (
            out["ok"]
            | "Ok" >> beam.Map(lambda it: f"{it.id} {[f.other_id for f in it.findings]}")
            | "K" >> beam.Map(_collect, "kept")
        )
        _ = (
            out["rejected"]
            | "Bad" >> beam.Map(lambda r: json.dumps(r, sort_keys=True))
            | "R" >> beam.Map(_collect, "rows")
        )
    return sorted(_SINK["kept"]), sorted(_SINK["rows"])


def test_exact_dedup_decides_the_same_with_a_superset_hint() -> None:
    items = [
        _item(3, "dup", "Write f."),
        _item(1, "first", "Write  f."),
        _item(2, "alone", "Write g."),
        _item(4, "conflict-a", "Write h."),
        _item(5, "conflict-b", "Write h.", "assert f(2) == 2"),
    ]
    hint = [*items, _item(9, "gone", "Write g.")]  # makes "alone" look repeated
    plain = _outcome(items, None)
    assert plain == _outcome(items, hint)
    assert plain[0] == ["alone []", "first ['dup']"]
    assert [json.loads(r)["reason"] for r in plain[1]].count("dedup.conflict") == 2
