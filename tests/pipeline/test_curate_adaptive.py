"""End to end: ``tasksieve curate --adaptive`` with the replay sampler (no model needed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tasksieve.pipeline.cli import main
from tests.curate_flags import FAST

ROOT = Path(__file__).resolve().parents[2]
TASKS = ROOT / "examples" / "tasks"
REPLAY = ROOT / "examples" / "replay" / "completions.jsonl"


def _rows(out: Path, sub: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for f in sorted((out / sub).rglob("*.parquet")):
        rows.extend(pq.read_table(f).to_pylist())
    return rows


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("adaptive") / "out"
    argv = ["curate", "--input", str(TASKS / "code.jsonl"), str(TASKS / "config.jsonl")]
    argv += ["--output", str(out), "--sampler", "replay", "--replay", str(REPLAY)]
    argv += ["--samples", "4", "--adaptive", "--adaptive-round", "2", "--quiet", *FAST]
    assert main(argv) == 0
    return out


def test_the_manifest_counts_samples_drawn_and_saved(run: Path) -> None:
    manifest = json.loads((run / "manifest.json").read_text())
    c = manifest["stage_counters"]
    assert c["adaptive.samples_drawn"] == manifest["counts"]["rollouts"]
    scored = [*_rows(run, "tasks"), *[r for r in _rows(run, "rejected") if r["n"]]]
    assert c["adaptive.samples_saved"] == sum(4 - r["n_requested"] for r in scored)
    assert c["adaptive.samples_saved"] > 0
    assert manifest["config"]["adaptive"]["max_samples"] == 4


def test_tasks_record_the_samples_they_used(run: Path) -> None:
    rows = _rows(run, "tasks")
    assert rows and all(r["n"] == r["n_requested"] and r["n"] in (2, 4) for r in rows)
    per_task: dict[str, int] = {}
    for r in _rows(run, "rollouts"):
        per_task[r["task_id"]] = per_task.get(r["task_id"], 0) + 1
    assert all(per_task[r["id"]] == r["n"] for r in rows)


def test_a_task_stopped_after_one_round_is_mixed(run: Path) -> None:
    """With the default band only a pass and a failure settle a task before the maximum."""
    early = [r for r in _rows(run, "tasks") if r["n"] == 2]
    assert early and all(r["k"] == 1 for r in early)


def test_every_task_is_kept_or_rejected_once_and_one_sandbox_served_every_round(
    run: Path,
) -> None:
    manifest = json.loads((run / "manifest.json").read_text())
    counts = manifest["counts"]
    assert counts["input"] == counts["kept"] + counts["rejected"]
    used = manifest["sandbox"]["used_by_workers"]
    assert [u["processes"] for u in used] == [1], used  # gates and all rounds: one process
