"""Benchmark sets and saved contamination indexes on S3 (moto on loopback) load as local ones."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from tasksieve.transforms.decontam.sets import ContaminationIndex, ContaminationItem
from tasksieve.transforms.decontam.stage import DecontamConfig, index_parts, load_source
from tasksieve.transforms.runtime import fsio
from tests.s3_server import S3Server, s3_server

ITEMS = [
    ContaminationItem("bench", "b/0", "def add(a, b):\n    return the sum of a and b"),
    ContaminationItem("bench", "b/1", "write a function that reverses a linked list in place"),
]


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    with s3_server() as server:
        fsio.configure(PipelineOptions(server.beam_args))
        yield server


def test_a_saved_index_round_trips_through_s3(s3: S3Server, tmp_path: Path) -> None:
    cfg = DecontamConfig(humaneval=False)
    ContaminationIndex(ITEMS, cfg.settings()).save(s3.url("sets/bench.parquet"))
    ContaminationIndex(ITEMS, cfg.settings()).save(str(tmp_path / "bench.parquet"))
    assert index_parts(s3.url("sets")) == [s3.url("sets/bench.parquet")]
    (remote,) = load_source(s3.url("sets"), cfg)
    (local,) = load_source(str(tmp_path / "bench.parquet"), cfg)
    assert remote[0] == local[0] == ITEMS
    assert remote[1] is not None and local[1] is not None
    assert [h.tolist() for h in remote[1]] == [h.tolist() for h in local[1]]


def test_a_raw_benchmark_file_on_s3_is_read_with_its_field_mapping(s3: S3Server) -> None:
    rows = [{"task_id": it.item_id, "prompt": it.text} for it in ITEMS]
    s3.put("raw/bench.jsonl", "".join(json.dumps(r) + "\n" for r in rows).encode())
    (loaded,) = load_source(s3.url("raw/bench.jsonl"), DecontamConfig(humaneval=False))
    assert [(it.benchmark, it.item_id, it.text) for it in loaded[0]] == [
        ("bench", it.item_id, it.text) for it in ITEMS
    ]


def test_a_missing_benchmark_on_s3_is_a_clean_error(s3: S3Server) -> None:
    with pytest.raises(ValueError, match="no such file"):
        load_source(s3.url("nowhere/set.jsonl"), DecontamConfig(humaneval=False))
