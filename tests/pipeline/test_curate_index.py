"""Incremental curation: a second run rejects tasks the first run kept, naming them."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq

from tasksieve.pipeline.cli import main
from tests.curate_flags import FAST

ROOT = Path(__file__).resolve().parents[2]
CODE = ROOT / "examples" / "tasks" / "code.jsonl"
REPLAY = ROOT / "examples" / "replay" / "completions.jsonl"


def _run(out: Path, index: Path) -> int:
    args = ["curate", "--input", str(CODE), "--output", str(out), "--sampler", "replay"]
    args += ["--replay", str(REPLAY), "--dedup-index", str(index), "--quiet", *FAST]
    return main(args)


def test_second_run_rejects_what_the_first_kept(tmp_path: Path) -> None:
    index = tmp_path / "index"
    assert _run(tmp_path / "run1", index) == 0
    first = json.loads((tmp_path / "run1" / "manifest.json").read_text())
    kept = {
        r["id"]
        for f in (tmp_path / "run1" / "tasks").rglob("*.parquet")
        for r in pq.read_table(f).to_pylist()
    }
    assert kept and first["counts"]["indexed"] == len(kept)

    assert _run(tmp_path / "run2", index) == 0
    rejected = [
        r
        for f in (tmp_path / "run2" / "rejected").glob("*.parquet")
        for r in pq.read_table(f).to_pylist()
    ]
    by_index = {r["record_id"]: r["detail"] for r in rejected if r["reason"] == "dedup.index"}
    assert set(by_index) == kept
    for task_id, detail in by_index.items():
        assert task_id in detail
