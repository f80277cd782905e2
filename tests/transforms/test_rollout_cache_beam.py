"""The rollout cache inside the Rollouts and Verify stages on Beam's DirectRunner.

The sampler is the real replay sampler (subclassed to count its calls, or to crash part way
through a run); the cache, the stages and the sandbox are the real ones.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from tasksieve.pipeline.curate.counters import read_counters
from tasksieve.schemas import TaskRecord
from tasksieve.transforms.rollouts import rollout_round
from tasksieve.transforms.rollouts.cache import store
from tasksieve.transforms.rollouts.rounds import ROLLOUTS, Rollouts, Verify
from tasksieve.transforms.runtime.items import Item
from tasksieve.transforms.samplers import SamplerConfig, SampleRequest, Samples
from tasksieve.transforms.samplers.replay import Recorded, ReplayModelHandler
from tasksieve.verifiers import SandboxConfig
from tests.transforms.add_task import ASSERTS

K = 2
N = 4
GOOD = "```python\ndef add(a, b):\n    return a + b\n```"
BAD = "```python\ndef add(a, b):\n    return a - b\n```"
CALLS: dict[str, int] = {"load": 0, "tasks": 0}
ROWS: list[dict[str, Any]] = []  # the in-memory runner runs the DoFns in this process


def collect(row: dict[str, Any]) -> None:
    ROWS.append(row)


class CountingReplay(ReplayModelHandler):
    """The replay sampler, one task per batch, counting model loads and tasks drawn;
    ``crash_after`` tasks drawn, it raises (a worker dying mid-run)."""

    crash_after: int | None = None

    def batch_elements_kwargs(self) -> dict[str, Any]:
        return {"min_batch_size": 1, "max_batch_size": 1}

    def load_model(self) -> Recorded:
        CALLS["load"] += 1
        return super().load_model()

    def run_inference(
        self, batch: Sequence[SampleRequest], model: Recorded, inference_args: Any = None
    ) -> list[Samples]:
        if self.crash_after is not None and CALLS["tasks"] >= self.crash_after:
            raise RuntimeError("planted crash in the sampler")
        CALLS["tasks"] += len(batch)
        return list(super().run_inference(batch, model, inference_args))


class Crashing(CountingReplay):
    crash_after = 2


def task(i: int) -> Item:
    rec = TaskRecord.model_validate(
        {
            "id": f"t.add{i}",
            "family": "code",
            "prompt": f"Write add(a, b). Variant {i}.",
            "verifier": {"family": "code", "style": "asserts", "entry_point": "add"}
            | {"asserts": ASSERTS},
            "reference_solution": "def add(a, b):\n    return a + b\n",
        }
    )
    return Item(rec, "f.jsonl", i + 1, f"{i:064d}")


@pytest.fixture
def replay(tmp_path: Path) -> Path:
    path = tmp_path / "replay.jsonl"
    rows = [{"task_id": f"t.add{i}", "completion": c} for i in range(N) for c in (GOOD, BAD)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture(autouse=True)
def counting(monkeypatch: pytest.MonkeyPatch) -> None:
    CALLS.update(load=0, tasks=0)
    monkeypatch.setattr(rollout_round, "make_model_handler", CountingReplay)


def run(cfg: SamplerConfig, cache: str | None) -> tuple[dict[str, int], list[dict[str, Any]]]:
    """Sample and verify the N tasks; the counters and the rollout rows (sorted)."""
    ROWS.clear()
    opts = PipelineOptions(["--direct_running_mode=in_memory"])
    p = beam.Pipeline(options=opts)
    tasks = p | beam.Create([task(i) for i in range(N)])
    sampled = tasks | Rollouts(cfg, "run", cache)
    verified = sampled["ok"] | Verify(
        SandboxConfig(allow_weak_isolation=True), "run", cache_dir=cache
    )
    _ = verified[ROLLOUTS] | beam.Map(collect)
    result = p.run()
    result.wait_until_finish()
    rows = [
        {"task": r["task_id"], "i": r["sample_index"], "c": r["completion"], "s": r["verdict"]}
        for r in ROWS
    ]
    for r in rows:
        r["s"] = r["s"]["status"]
    return read_counters(result).values, sorted(rows, key=lambda r: (r["task"], r["i"]))


def cfg_for(replay: Path, **kw: Any) -> SamplerConfig:
    return SamplerConfig(backend="replay", replay_path=str(replay), samples=K, **kw)


def test_a_rerun_reuses_every_completion_and_verdict_without_the_sampler(
    tmp_path: Path, replay: Path
) -> None:
    cache = str(tmp_path / "cache")
    first_counts, first = run(cfg_for(replay), cache)
    assert first_counts["cache.tasks_sampled"] == N and CALLS["tasks"] == N
    CALLS.update(load=0, tasks=0)
    counts, again = run(cfg_for(replay), cache)
    assert again == first and len(first) == N * K
    assert CALLS == {"load": 0, "tasks": 0}  # the sampler's model was never even loaded
    assert counts["cache.sample_hits"] == counts["cache.verdict_hits"] == N * K
    assert "cache.sample_misses" not in counts and "cache.verdict_misses" not in counts


def test_a_rerun_after_a_crash_does_not_resample_what_was_stored(
    tmp_path: Path, replay: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = str(tmp_path / "cache")
    monkeypatch.setattr(rollout_round, "make_model_handler", Crashing)
    # the sampler's crash no longer fails the run: its tasks are rejected as
    # rollouts.sampler_error (tasksieve.transforms.rollouts.guard) and nothing of theirs is stored
    crashed, _ = run(cfg_for(replay), cache)
    assert crashed["rollouts.sampler_errors"] == N - Crashing.crash_after
    assert len(store.load(cache, store.SAMPLES)[0]) == Crashing.crash_after * K
    monkeypatch.setattr(rollout_round, "make_model_handler", CountingReplay)
    CALLS.update(load=0, tasks=0)
    counts, rows = run(cfg_for(replay), cache)
    assert CALLS["tasks"] == counts["cache.tasks_sampled"] == N - Crashing.crash_after
    assert counts["cache.sample_hits"] == Crashing.crash_after * K
    assert len(rows) == N * K


def test_a_changed_sampling_parameter_misses(tmp_path: Path, replay: Path) -> None:
    cache = str(tmp_path / "cache")
    run(cfg_for(replay), cache)
    CALLS.update(load=0, tasks=0)
    counts, _ = run(cfg_for(replay, temperature=0.1), cache)
    assert CALLS["tasks"] == N and "cache.sample_hits" not in counts
    assert counts["cache.sample_misses"] == N * K
    assert counts["cache.verdict_hits"] == N * K  # same solutions: their verdicts are reused


def test_without_a_cache_directory_everything_is_sampled_and_nothing_stored(
    tmp_path: Path, replay: Path
) -> None:
    counts, rows = run(cfg_for(replay), None)
    assert CALLS["tasks"] == N and len(rows) == N * K
    assert not [k for k in counts if k.startswith("cache.")]
    assert not list(tmp_path.glob("**/part-*"))


def test_a_corrupt_cache_entry_is_sampled_again(tmp_path: Path, replay: Path) -> None:
    cache = tmp_path / "cache"
    _, first = run(cfg_for(replay), str(cache))
    for part in (cache / store.SAMPLES).glob("part-*"):  # every stored good completion altered
        text = gzip.decompress(part.read_bytes()).replace(b"a + b", b"a * b")
        part.write_bytes(gzip.compress(text))
    CALLS.update(load=0, tasks=0)
    counts, again = run(cfg_for(replay), str(cache))
    assert again == first and CALLS["tasks"] == N
    assert counts["cache.corrupt_entries"] == N  # one good completion per task
