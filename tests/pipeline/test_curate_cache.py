"""`tasksieve curate` with the rollout cache: a re-run with another band samples nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tasksieve.pipeline.cli import main
from tasksieve.transforms.samplers.replay import ReplayModelHandler

ROOT = Path(__file__).resolve().parents[2]
TASKS = ROOT / "examples" / "tasks" / "code.jsonl"
REPLAY = ROOT / "examples" / "replay" / "completions.jsonl"
K = 4


def curate(out: Path, *extra: str) -> dict[str, Any]:
    argv = ["curate", "--input", str(TASKS), "--output", str(out), "--sampler", "replay"]
    argv += ["--replay", str(REPLAY), "--samples", str(K), "--no-weak-tests", "--no-ambiguity"]
    assert main([*argv, "--quiet", "--overwrite", *extra]) == 0
    manifest: dict[str, Any] = json.loads((out / "manifest.json").read_text())
    return manifest


def rollouts(out: Path) -> list[tuple[str, int, str, str]]:
    rows = [
        r
        for f in sorted((out / "rollouts").rglob("*.parquet"))
        for r in pq.read_table(f).to_pylist()
    ]
    return sorted(
        (r["task_id"], r["sample_index"], r["completion"], r["verdict"]["status"]) for r in rows
    )


@pytest.fixture(scope="module")
def first(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    out = tmp_path_factory.mktemp("cache") / "out"
    return out, curate(out)


def no_sampler(*_: Any) -> Any:
    raise AssertionError("the sampler was loaded although every completion is cached")


def test_a_rerun_with_another_band_reuses_every_completion_and_verdict(
    first: tuple[Path, dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    out, manifest = first
    before = rollouts(out)
    n = manifest["counts"]["rollouts"]
    assert manifest["stage_counters"]["cache.sample_misses"] == n
    monkeypatch.setattr(ReplayModelHandler, "load_model", no_sampler)
    again = curate(out, "--too-hard", "0.3", "--too-easy", "0.7")
    counters = again["stage_counters"]
    assert counters["cache.sample_hits"] == counters["cache.verdict_hits"] == n
    assert not {"cache.sample_misses", "cache.verdict_misses", "cache.tasks_sampled"} & set(
        counters
    )
    assert rollouts(out) == before
    assert again["rejected_by_reason"] != manifest["rejected_by_reason"]  # the band did change


def test_no_cache_samples_and_verifies_everything_again(
    first: tuple[Path, dict[str, Any]],
) -> None:
    out, manifest = first
    parts = sorted(out.parent.glob("out.rollout-cache/*/part-*"))
    again = curate(out, "--no-cache")
    assert not [k for k in again["stage_counters"] if k.startswith("cache.")]
    assert again["stage_counters"]["verify.pass"] == manifest["stage_counters"]["verify.pass"]
    assert sorted(out.parent.glob("out.rollout-cache/*/part-*")) == parts  # nothing written


def test_an_adaptive_run_reuses_the_samples_of_a_fixed_k_run(
    first: tuple[Path, dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    out, _ = first
    fixed = set(rollouts(out))
    monkeypatch.setattr(ReplayModelHandler, "load_model", no_sampler)
    again = curate(out, "--adaptive", "--adaptive-round", "2")
    counters = again["stage_counters"]
    drawn = counters["adaptive.samples_drawn"]
    assert drawn == again["counts"]["rollouts"] < len(fixed)  # some tasks stopped early
    assert counters["cache.sample_hits"] == counters["cache.verdict_hits"] == drawn
    assert not {"cache.sample_misses", "cache.verdict_misses"} & set(counters)
    assert set(rollouts(out)) <= fixed
