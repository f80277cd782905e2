"""The rollout cache on the adaptive and multi-turn paths, on Beam's DirectRunner.

The sampler is the real replay sampler, subclassed to count its calls
(``test_rollout_cache_beam.CountingReplay``); the cache, the stages and the sandbox are the
real ones. Sample i of a task has one cache key whichever round, or fixed-K run, drew it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from tasksieve.pipeline.curate.counters import read_counters
from tasksieve.transforms.algorithms.adaptive_stopping import AdaptiveConfig
from tasksieve.transforms.algorithms.stats import BandConfig
from tasksieve.transforms.rollouts import rollout_round
from tasksieve.transforms.rollouts.adaptive import AdaptiveRollouts
from tasksieve.transforms.rollouts.episode_state import EpisodeConfig
from tasksieve.transforms.rollouts.multi_turn import Episodes
from tasksieve.transforms.rollouts.rounds import ROLLOUTS, Rollouts, Verify
from tasksieve.transforms.runtime.common import REJECTED
from tasksieve.transforms.samplers import SamplerConfig
from tasksieve.verifiers import SandboxConfig
from tests.transforms.test_rollout_cache_beam import BAD, CALLS, GOOD, CountingReplay, task

N = 3
K = 8
SANDBOX = SandboxConfig(allow_weak_isolation=True)
ROUNDS = AdaptiveConfig(max_samples=K, first_round=2, round_size=2)
NARROW = BandConfig(0.45, 0.55)  # 1 pass in 2 never settles early: every round is drawn
WIDE = BandConfig()  # settled ("keep") after the first round of 2
ROWS: list[dict[str, Any]] = []


def collect(row: dict[str, Any]) -> None:
    ROWS.append(row)


@pytest.fixture
def sampler(tmp_path: Path) -> SamplerConfig:
    path = tmp_path / "replay.jsonl"
    rows = [{"task_id": f"t.add{i}", "completion": c} for i in range(N) for c in [GOOD, BAD] * 4]
    rows += [  # turn 2 of the episodes that failed turn 1 (episodes 1, 3, 5, 7)
        {"task_id": f"t.add{i}", "completion": GOOD, "turn": 2, "episode": j}
        for i in range(N)
        for j in (1, 3, 5, 7)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return SamplerConfig(backend="replay", replay_path=str(path), samples=K)


@pytest.fixture(autouse=True)
def counting(monkeypatch: pytest.MonkeyPatch) -> None:
    CALLS.update(load=0, tasks=0)
    monkeypatch.setattr(rollout_round, "make_model_handler", CountingReplay)


def run(stage: beam.PTransform, cache: str, fixed: bool = False) -> dict[str, int]:
    """Run ``stage`` on the N tasks (fixed: followed by Verify); its counters. Fails on any
    rejection; the rollout rows land in ROWS."""
    ROWS.clear()
    p = beam.Pipeline(options=PipelineOptions(["--direct_running_mode=in_memory"]))
    out = p | beam.Create([task(i) for i in range(N)]) | stage
    if fixed:
        out = out["ok"] | Verify(SANDBOX, "run", cache_dir=cache)
    _ = out[ROLLOUTS] | "Rows" >> beam.Map(collect)
    _ = out[REJECTED] | "NoRejections" >> beam.Map(_refuse)
    result = p.run()
    result.wait_until_finish()
    return read_counters(result).values


def _refuse(row: dict[str, Any]) -> None:
    raise AssertionError(f"unexpected rejection {row['reason']}: {row['detail']}")


def adaptive(sampler: SamplerConfig, band: BandConfig, cache: str) -> AdaptiveRollouts:
    return AdaptiveRollouts(sampler, ROUNDS, SANDBOX, "run", band, cache_dir=cache)


def test_an_adaptive_rerun_with_another_band_reuses_every_completion_and_verdict(
    tmp_path: Path, sampler: SamplerConfig
) -> None:
    cache = str(tmp_path / "cache")
    first = run(adaptive(sampler, NARROW, cache), cache)
    assert first["adaptive.samples_drawn"] == N * K and CALLS["tasks"] == N * 4  # 4 rounds
    CALLS.update(load=0, tasks=0)
    again = run(adaptive(sampler, WIDE, cache), cache)
    assert CALLS == {"load": 0, "tasks": 0}  # no round even loaded the sampler's model
    assert again["adaptive.samples_drawn"] == N * 2
    assert again["cache.sample_hits"] == again["cache.verdict_hits"] == N * 2
    assert "cache.sample_misses" not in again and "cache.verdict_misses" not in again


def test_an_adaptive_run_reuses_the_samples_of_a_fixed_k_run(
    tmp_path: Path, sampler: SamplerConfig
) -> None:
    cache = str(tmp_path / "cache")
    run(Rollouts(sampler, "run", cache), cache, fixed=True)
    fixed = sorted((r["task_id"], r["sample_index"], r["completion"]) for r in ROWS)
    CALLS.update(load=0, tasks=0)
    counts = run(adaptive(sampler, NARROW, cache), cache)
    assert CALLS == {"load": 0, "tasks": 0}
    assert counts["cache.sample_hits"] == counts["cache.verdict_hits"] == N * K
    assert sorted((r["task_id"], r["sample_index"], r["completion"]) for r in ROWS) == fixed


def test_a_multi_turn_rerun_samples_no_turn_again(tmp_path: Path, sampler: SamplerConfig) -> None:
    cache = str(tmp_path / "cache")
    episodes = Episodes(sampler, EpisodeConfig(turns=2), SANDBOX, "run", cache_dir=cache)
    first = run(episodes, cache)
    assert first["cache.tasks_sampled"] == N + N * 4  # turn 1 per task, turn 2 per episode
    rows = sorted((r["task_id"], r["sample_index"], r["turn"], r["completion"]) for r in ROWS)
    CALLS.update(load=0, tasks=0)
    again = run(episodes, cache)
    assert CALLS == {"load": 0, "tasks": 0}
    assert again["cache.sample_hits"] == N * K + N * 4
    assert again["cache.verdict_hits"] == N * K + N * 4
    assert (
        sorted((r["task_id"], r["sample_index"], r["turn"], r["completion"]) for r in ROWS) == rows
    )
