"""A kept task round-trips: its row in tasks/*.parquet gives back the TaskRecord that was read.

Every valid example of every family goes through Filter and Write (the real Beam transforms,
writing real Parquet shards), plus records with rich metadata and every source field.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from apache_beam.testing.test_pipeline import TestPipeline as BeamPipeline

from tasksieve.schemas import CuratedTask, RewardSpec, TaskRecord
from tasksieve.schemas.validation import validate_record
from tasksieve.transforms.algorithms.stats import BandConfig
from tasksieve.transforms.filter import Filter
from tasksieve.transforms.runtime.items import Item, Scored
from tasksieve.transforms.write import Write

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples" / "tasks").glob("*.jsonl"))
BIG = "∑é😀\u202e" + "x" * 100_000

RICH_METADATA: dict[str, Any] = {
    "nested": {"a": {"b": {"c": [1, 2, {"d": None}]}}, "empty": {}},
    "list": [1, 2.5, -0.0, True, False, None, "s", [], [[]]],
    "unicode": "naïve 日本語 🙂 \u202e rtl \u0000 nul \t tab",
    "big_int": 2**70,
    "neg_int": -(2**63),
    "tiny": 5e-324,
    "huge": 1.7976931348623157e308,
    "float_whole": 3.0,
    "large_text": BIG,
    "keys with spaces and 'quotes' \"too\"": "v",
    "": "empty key",
}
RICH_REWARD: dict[str, Any] = {
    "kind": "fraction",
    "runtime": {"over": 3.5, "weight": 0.25, "cap": 1},
    "limits": {"weight": 0.5, "limits": ["memory", "output"]},
}
FULL_SOURCE = {
    "dataset": "ds/ünïcode",
    "license": "CC-BY-4.0",
    "url": "https://example.org/tasks?id=1&x=%20",
    "author": "Ana Lópes <ana@example.org>",
}


def _examples() -> list[dict[str, Any]]:
    out = []
    for f in EXAMPLES:
        for line in f.read_text(encoding="utf-8").splitlines():
            try:
                data = json.loads(line)
            except json.JSONDecodeError:
                continue
            task, _ = validate_record(f.name, 1, data)
            if task is not None:
                out.append(data)
    return out


def _rich(examples: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per family: rich metadata and a full source; also a long prompt with no metadata."""
    out = []
    for family in ("code", "sql", "api", "config"):
        base = next(e for e in examples if e["family"] == family)
        rich = copy.deepcopy(base)
        rich["id"] = f"{base['id']}.rich"
        rich["metadata"] = RICH_METADATA
        rich["source"] = FULL_SOURCE
        rich["tags"] = ["ünïcode", "", "a,b"]
        rich["reward"] = RICH_REWARD
        out.append(rich)
        bare = copy.deepcopy(base)
        bare["id"] = f"{base['id']}.bare"
        bare["prompt"] = base["prompt"] + BIG
        bare.pop("metadata", None)
        bare.pop("source", None)
        bare.pop("tags", None)
        out.append(bare)
    return out


EXAMPLE_RECORDS = _examples()
RECORDS = {r["id"]: r for r in [*EXAMPLE_RECORDS, *_rich(EXAMPLE_RECORDS)]}


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("kept")
    scored = [
        Scored(Item(TaskRecord.model_validate(data), "in.jsonl", i, "sha"), 4, 2, "m", 4)
        for i, data in enumerate(RECORDS.values(), 1)
    ]
    with BeamPipeline() as p:
        kept = p | "Scored" >> beam.Create(scored) | Filter(BandConfig(), "run1", "fp")
        none = p | "None" >> beam.Create([]) | beam.Filter(lambda r: False)
        _ = {"tasks": kept["ok"], "rejected": kept["rejected"], "rollouts": none} | Write(
            str(root), "fp", "run1"
        )
    return root


def _kept(root: Path) -> dict[str, dict[str, Any]]:
    rows = {}
    for f in sorted((root / "tasks").rglob("*.parquet")):
        for row in pq.read_table(f).to_pylist():
            rows[row["id"]] = row
    return rows


def test_every_record_is_kept_once(shards: Path) -> None:
    assert sorted(_kept(shards)) == sorted(RECORDS)
    assert {r["family"] for r in RECORDS.values()} == {"code", "sql", "api", "config", "repo"}


@pytest.mark.parametrize("task_id", sorted(RECORDS))
def test_kept_row_gives_back_the_input_task(shards: Path, task_id: str) -> None:
    row = _kept(shards)[task_id]
    back = CuratedTask.model_validate(row).task_record()
    assert back == TaskRecord.model_validate(RECORDS[task_id])


@pytest.mark.parametrize("task_id", sorted(i for i in RECORDS if i.endswith(".rich")))
def test_rich_metadata_and_source_come_back_whole(shards: Path, task_id: str) -> None:
    row = _kept(shards)[task_id]
    assert json.loads(row["metadata"]) == RICH_METADATA
    assert (row["source_url"], row["source_author"]) == (FULL_SOURCE["url"], FULL_SOURCE["author"])
    assert (row["source_dataset"], row["source_license"]) == (
        FULL_SOURCE["dataset"],
        FULL_SOURCE["license"],
    )


@pytest.mark.parametrize("task_id", sorted(i for i in RECORDS if i.endswith(".rich")))
def test_reward_spec_comes_back_whole(shards: Path, task_id: str) -> None:
    row = _kept(shards)[task_id]
    assert RewardSpec.model_validate(json.loads(row["reward"])) == RewardSpec.model_validate(
        RICH_REWARD
    )


@pytest.mark.parametrize("column", ["metadata", "verifier", "reward"])
def test_json_columns_use_the_parquet_json_type(shards: Path, column: str) -> None:
    for f in (shards / "tasks").rglob("*.parquet"):
        assert pq.read_schema(f).field(column).type == pa.json_()


def test_duckdb_queries_metadata_with_json_functions(shards: Path) -> None:
    duckdb = pytest.importorskip("duckdb")
    rows = duckdb.sql(
        "select id, typeof(metadata), metadata->>'$.unicode', "
        "json_extract(metadata, '$.nested.a.b.c[1]')::int, verifier->>'$.family' "
        f"from '{shards}/tasks/**/*.parquet' where id like '%.rich' order by id"
    ).fetchall()
    assert len(rows) == 4
    for task_id, typ, text, second, family in rows:
        assert typ == "JSON"
        assert text == RICH_METADATA["unicode"]
        assert second == 2
        assert task_id.startswith(family)
