"""Validate, ExactDedup, NearDedup and Filter as Beam transforms on the DirectRunner."""

from __future__ import annotations

import json
from typing import Any

import apache_beam as beam
import pytest
from apache_beam.testing.test_pipeline import TestPipeline as BeamPipeline
from apache_beam.testing.util import assert_that, equal_to

from tasksieve.schemas import TaskRecord
from tasksieve.transforms.algorithms.stats import BandConfig
from tasksieve.transforms.dedup.exact import ExactDedup
from tasksieve.transforms.dedup.near import DedupConfig, NearDedup
from tasksieve.transforms.filter import Filter
from tasksieve.transforms.ingest.records import SourceRecord
from tasksieve.transforms.ingest.validate import Validate
from tasksieve.transforms.runtime.items import Item, Scored, rejection


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
        Scored(_item(1, "easy", "p1"), 4, 4, "m", 4),
        Scored(_item(2, "mid", "p2"), 4, 2, "m", 4),
        Scored(_item(3, "hard", "p3"), 4, 0, "m", 4),
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


# ---------------------------------------------------------------- rejected rows keep raw whole
BIG = "é→∑ " + "x" * 100_000


def _big_texts() -> dict[int, tuple[str, str]]:
    """Input line -> (the reason it must get, its exact text), each record over 100 KB."""

    def task(task_id: str, prompt: str, **verifier: Any) -> str:
        rec = _rec(0, task_id, prompt)
        rec["verifier"].update(verifier)
        rec["metadata"] = {"padding": BIG}
        return json.dumps(rec, ensure_ascii=False)

    words = " ".join(f"w{i}" for i in range(3000))
    return {
        1: ("validate.parse_error", '{"id": "broken", "prompt": "' + BIG),
        2: ("validate.schema", task("typed", "Write add.", timeout_s="600")),
        3: ("keep", task("dup", "Write add(a, b) for ints.")),
        4: ("validate.duplicate_id", task("dup", "Another prompt for the same id.")),
        5: ("keep", task("orig", "Write add(a, b) for floats.")),
        6: ("dedup.exact", task("copy", "  Write add(a, b)   for floats.\n")),
        7: ("keep", task("long", words + " alpha")),
        8: ("dedup.near", task("near", words + " beta")),
        9: ("filter.too_easy", task("easy", "Write add(a, b) for decimals.")),
        10: ("filter.too_hard", task("hard", "Write add(a, b) for fractions.")),
    }


def _source(line: int, text: str) -> SourceRecord:
    try:
        return SourceRecord("in.jsonl", line, json.loads(text), None, text)
    except json.JSONDecodeError as e:
        return SourceRecord("in.jsonl", line, None, f"invalid JSON: {e.msg}", text)


def _score(it: Item) -> Scored:
    passed = {"easy": 4, "hard": 0}.get(it.id, 2)
    return Scored(it, 4, passed, "m", 4)


@pytest.fixture(scope="module")
def rejected_rows(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """Rejected rows of Validate -> ExactDedup -> NearDedup -> Filter over the big records."""
    dump = tmp_path_factory.mktemp("rejected") / "rows.jsonl"
    texts = _big_texts()
    with BeamPipeline() as p:
        src = p | beam.Create([_source(line, text) for line, (_, text) in texts.items()])
        valid = src | Validate("run1")
        exact = valid["ok"] | ExactDedup("run1")
        near = exact["ok"] | NearDedup(DedupConfig(), "run1")
        kept = near["ok"] | beam.Map(_score) | Filter(BandConfig(), "run1", "fp")
        rejected = (
            valid["rejected"],
            exact["rejected"],
            near["rejected"],
            kept["rejected"],
        ) | beam.Flatten()
        _ = (
            rejected
            | beam.Map(lambda r: json.dumps(r, ensure_ascii=False))
            | beam.io.WriteToText(str(dump), shard_name_template="")
        )
    return [json.loads(line) for line in dump.read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize(
    "reason",
    sorted({reason for reason, _ in _big_texts().values() if reason != "keep"}),
)
def test_rejected_row_keeps_the_whole_record_text(
    rejected_rows: list[dict[str, Any]], reason: str
) -> None:
    texts = _big_texts()
    rows = [r for r in rejected_rows if r["reason"] == reason]
    assert rows, f"no row rejected as {reason}: {[r['reason'] for r in rejected_rows]}"
    for row in rows:
        _, text = texts[row["source_line"]]
        assert len(row["raw"]) > 100_000
        assert row["raw"] == text


def test_rejected_raw_is_not_cut_by_the_row_builder() -> None:
    raw = "{" + "y" * 500_000
    row = rejection(stage="s", reason="r", detail="d", run_id="r1", raw=raw)
    assert row["raw"] == raw
