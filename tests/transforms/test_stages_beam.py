"""Validate, ExactDedup and Filter as Beam transforms on the DirectRunner."""

from __future__ import annotations

import json
from typing import Any

import apache_beam as beam
from apache_beam.testing.test_pipeline import TestPipeline as BeamPipeline
from apache_beam.testing.util import assert_that, equal_to

from schemas import TaskRecord
from transforms.dedup import ExactDedup
from transforms.items import Item, Scored
from transforms.score import Filter
from transforms.sources import SourceRecord
from transforms.stats import BandConfig
from transforms.validate import Validate


def _rec(line: int, task_id: str, prompt: str = "Write add(a, b).") -> dict[str, Any]:
    return {
        "id": task_id,
        "family": "code",
        "prompt": prompt,
        "verifier": {
            "family": "code",
            "style": "asserts",
            "entry_point": "add",
            "asserts": ["assert add(1, 2) == 3"],
        },
        "reference_solution": "def add(a, b):\n    return a + b\n",
    }


def _src(line: int, data: dict[str, Any] | None, error: str | None = None) -> SourceRecord:
    return SourceRecord("in.jsonl", line, data, error, json.dumps(data) if data else "{bad")


def test_validate_splits_good_bad_and_duplicate_ids() -> None:
    records = [
        _src(1, _rec(1, "a")),
        _src(2, None, "invalid JSON: Expecting value at column 1"),
        _src(3, {"id": "b", "family": "code"}),
        _src(4, _rec(4, "a", "another prompt")),
    ]
    with BeamPipeline() as p:
        out = p | beam.Create(records) | Validate("run1")
        assert_that(
            out["ok"] | beam.Map(lambda it: (it.id, it.source_line)),
            equal_to([("a", 1)]),
            label="ok",
        )
        assert_that(
            out["rejected"] | beam.Map(lambda r: (r["reason"], r["source_line"])),
            equal_to(
                [("validate.parse_error", 2), ("validate.schema", 3), ("validate.duplicate_id", 4)]
            ),
            label="rejected",
        )


def _item(line: int, task_id: str, prompt: str) -> Item:
    return Item(TaskRecord.model_validate(_rec(line, task_id, prompt)), "in.jsonl", line, "x")


def test_exact_dedup_keeps_earliest_and_folds_space() -> None:
    items = [
        _item(2, "later", "Write   add(a, b).  "),
        _item(1, "first", "Write add(a, b)."),
        _item(3, "other", "Write sub(a, b)."),
    ]
    with BeamPipeline() as p:
        out = p | beam.Create(items) | ExactDedup("run1")
        assert_that(
            out["ok"] | beam.Map(lambda it: it.id), equal_to(["first", "other"]), label="ok"
        )
        assert_that(
            out["rejected"] | beam.Map(lambda r: (r["record_id"], r["reason"])),
            equal_to([("later", "dedup.exact")]),
            label="rejected",
        )


def test_filter_applies_the_band_and_records_pass_rates() -> None:
    scored = [
        Scored(_item(1, "easy", "p1"), 4, 4, "m"),
        Scored(_item(2, "mid", "p2"), 4, 2, "m"),
        Scored(_item(3, "hard", "p3"), 4, 0, "m"),
    ]
    with BeamPipeline() as p:
        out = p | beam.Create(scored) | Filter(BandConfig(), "run1", "fp")
        assert_that(
            out["ok"] | beam.Map(lambda r: (r["id"], r["pass_rate"], r["difficulty"])),
            equal_to([("mid", 0.5, "keep")]),
            label="ok",
        )
        assert_that(
            out["rejected"] | beam.Map(lambda r: (r["record_id"], r["reason"], r["k"], r["n"])),
            equal_to([("easy", "filter.too_easy", 4, 4), ("hard", "filter.too_hard", 0, 4)]),
            label="rejected",
        )
