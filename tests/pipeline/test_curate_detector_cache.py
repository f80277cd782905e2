"""`tasksieve curate` with the detectors on: the same kept and rejected tasks, with the same
reasons and evidence, without the rollout cache, with an empty one and with a warm one; the
warm run measures no gate or detector again."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tasksieve.pipeline.cli import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = [ROOT / "examples" / "tasks" / n for n in ("code.jsonl", "problems.jsonl")]
REPLAY = ROOT / "examples" / "replay" / "completions.jsonl"
# weak tests, an ambiguous statement, a trivial solution that passes, and a kept-or-banded task
PICKED = ("code.can_vote", "code.middle_element", "code.celsius_to_fahrenheit", "code.add")


def _input(tmp: Path) -> Path:
    lines = [r for f in EXAMPLES for r in f.read_text().splitlines()]
    rows = [r for r in lines if any(f'"id":"{i}"' in r for i in PICKED)]
    assert len(rows) == len(PICKED)
    path = tmp / "tasks.jsonl"
    path.write_text("\n".join(rows) + "\n")
    return path


def _curate(tasks: Path, out: Path, *extra: str) -> tuple[dict[str, Any], Any]:
    argv = ["curate", "--input", str(tasks), "--output", str(out), "--sampler", "replay"]
    argv += ["--replay", str(REPLAY), "--samples", "4", "--quiet", "--overwrite", *extra]
    assert main(argv) == 0
    manifest: dict[str, Any] = json.loads((out / "manifest.json").read_text())
    kept = sorted(r["id"] for r in _rows(out / "tasks"))
    rejected = sorted((r["record_id"], r["reason"], r["detail"]) for r in _rows(out / "rejected"))
    return manifest, (kept, rejected)


def _rows(folder: Path) -> list[dict[str, Any]]:
    return [r for f in sorted(folder.rglob("*.parquet")) for r in pq.read_table(f).to_pylist()]


@pytest.mark.slow
def test_the_detector_cache_keeps_every_outcome_and_a_rerun_measures_nothing(
    tmp_path: Path,
) -> None:
    tasks = _input(tmp_path)
    _, before = _curate(tasks, tmp_path / "plain", "--no-cache")
    cold_manifest, cold = _curate(tasks, tmp_path / "out")
    warm_manifest, warm = _curate(tasks, tmp_path / "out")
    assert before == cold == warm
    reasons = {r[1] for r in before[1]}
    assert {"gate.weak_tests", "filter.ambiguous", "gate.trivial_passes"} <= reasons
    cold_counts = cold_manifest["stage_counters"]
    warm_counts = warm_manifest["stage_counters"]
    lookups = cold_counts["cache.detector_misses"]
    assert lookups >= len(PICKED) and "cache.detector_hits" not in cold_counts
    assert warm_counts["cache.detector_hits"] == lookups
    assert "cache.detector_misses" not in warm_counts
