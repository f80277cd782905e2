"""Dead letters on the adaptive and multi-turn paths: a crash rejects only its task, once.

Each path runs twice on the same four tasks, in process on the DirectRunner: clean, then with
a crash planted in the plain function a step calls (the replay sampler for one task's later
round or turn, the rollout row builder for another task's later sample), as
``tests/pipeline/test_faults.py`` does for the one-shot path. The sampler, verifier and
sandbox are the real ones.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions

import tasksieve.transforms.rollouts.multi_turn
import tasksieve.transforms.rollouts.rounds
from tasksieve.transforms.algorithms.adaptive_stopping import AdaptiveConfig
from tasksieve.transforms.algorithms.stats import BandConfig
from tasksieve.transforms.rollouts.adaptive import AdaptiveRollouts
from tasksieve.transforms.rollouts.episode_state import EpisodeConfig
from tasksieve.transforms.rollouts.multi_turn import Episodes
from tasksieve.transforms.runtime.common import REJECTED
from tasksieve.transforms.samplers import SamplerConfig
from tasksieve.transforms.samplers.replay import ReplayModelHandler
from tasksieve.verifiers import SandboxConfig
from tests.transforms.test_rollout_cache_beam import BAD, GOOD, task

N = 4
SAMPLER_HIT, VERIFY_HIT = "t.add1", "t.add2"  # the tasks the planted crashes hit
BYSTANDERS = {f"t.add{i}" for i in range(N)} - {SAMPLER_HIT, VERIFY_HIT}
SANDBOX = SandboxConfig(allow_weak_isolation=True)
OUT: dict[str, list[Any]] = {}


def _collect(element: Any, name: str) -> None:
    OUT.setdefault(name, []).append(element)


def run(stage: beam.PTransform) -> dict[str, Any]:
    """Task id -> (n, k) of its Scored, or the list of its rejections' (stage, reason, detail)."""
    OUT.clear()
    p = beam.Pipeline(options=PipelineOptions(["--direct_running_mode=in_memory"]))
    out = p | beam.Create([task(i) for i in range(N)]) | stage
    for name in ("ok", REJECTED):
        _ = out[name] | f"Collect{name}" >> beam.Map(_collect, name)
    p.run().wait_until_finish()
    found: dict[str, Any] = {}
    for s in OUT.get("ok", []):
        assert s.item.id not in found
        found[s.item.id] = (s.n, s.k)
    for r in OUT.get(REJECTED, []):
        assert not isinstance(found.get(r["record_id"]), tuple), "kept and rejected"
        found.setdefault(r["record_id"], []).append((r["stage"], r["reason"], r["detail"]))
    assert len(OUT.get("ok", [])) + len(OUT.get(REJECTED, [])) == N  # conservation
    return found


def _raising(real: Callable[..., Any], hit: Callable[..., bool], what: str) -> Any:
    def planted(*args: Any, **kwargs: Any) -> Any:
        if hit(*args, **kwargs):
            raise RuntimeError(f"planted crash in {what}")
        return real(*args, **kwargs)

    return planted


def _plant(mp: pytest.MonkeyPatch, sampler_hit: Callable[..., bool], row_hit: Any) -> None:
    """Crash the replay sampler where ``sampler_hit`` says and the rollout row builder of
    ``row_hit`` (module, which call) on it."""
    real = ReplayModelHandler.run_inference
    mp.setattr(ReplayModelHandler, "run_inference", _raising(real, sampler_hit, "the sampler"))
    module, hit = row_hit
    mp.setattr(module, "Rollout", _raising(module.Rollout, hit, "verify"))


def _replay(path: Path, rows: list[dict[str, Any]]) -> SamplerConfig:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return SamplerConfig(backend="replay", replay_path=str(path), samples=4, batch_size=8)


@pytest.fixture(scope="module")
def adaptive(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[str, Any]]:
    """(clean, crashed) adaptive runs: 4 samples in rounds of 2, every round drawn."""
    rows = [{"task_id": f"t.add{i}", "completion": c} for i in range(N) for c in [GOOD, BAD] * 2]
    sampler = _replay(tmp_path_factory.mktemp("adaptive") / "r.jsonl", rows)
    cfg = AdaptiveConfig(max_samples=4, first_round=2, round_size=2)
    stage = AdaptiveRollouts(sampler, cfg, SANDBOX, "run", BandConfig(0.45, 0.55))
    clean = run(stage)
    with pytest.MonkeyPatch.context() as mp:
        _plant(  # round 2 draws samples 2 and 3
            mp,
            lambda self, batch, *a: any(
                r.task_id == SAMPLER_HIT and self._cfg.first_sample == 2 for r in batch
            ),
            (
                tasksieve.transforms.rollouts.rounds,
                lambda **kw: kw["task_id"] == VERIFY_HIT and kw["sample_index"] == 3,
            ),
        )
        crashed = run(stage)
    return clean, crashed


@pytest.fixture(scope="module")
def turns(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[str, Any]]:
    """(clean, crashed) two-turn runs: episodes 1 and 3 fail turn 1 and pass turn 2."""
    rows = [{"task_id": f"t.add{i}", "completion": c} for i in range(N) for c in [GOOD, BAD] * 2]
    rows += [
        {"task_id": f"t.add{i}", "completion": GOOD, "turn": 2, "episode": j}
        for i in range(N)
        for j in (1, 3)
    ]
    sampler = _replay(tmp_path_factory.mktemp("turns") / "r.jsonl", rows)
    stage = Episodes(sampler, EpisodeConfig(turns=2), SANDBOX, "run")
    clean = run(stage)
    with pytest.MonkeyPatch.context() as mp:
        _plant(
            mp,
            lambda self, batch, *a: any(r.task_id == SAMPLER_HIT and r.turn == 2 for r in batch),
            (  # every path builds its rows through tasksieve.transforms.rollouts.rounds.rollout_row
                tasksieve.transforms.rollouts.rounds,
                lambda **kw: kw["task_id"] == VERIFY_HIT and kw["turn"] == 2,
            ),
        )
        crashed = run(stage)
    return clean, crashed


PATHS = ("adaptive", "turns")


@pytest.mark.parametrize("path", PATHS)
def test_every_task_is_kept_without_crashes(path: str, request: pytest.FixtureRequest) -> None:
    clean, _ = request.getfixturevalue(path)
    assert clean == {f"t.add{i}": (4, 4 if path == "turns" else 2) for i in range(N)}


@pytest.mark.parametrize("path", PATHS)
def test_a_later_sampler_crash_rejects_its_task_once_as_a_sampler_error(
    path: str, request: pytest.FixtureRequest
) -> None:
    _, crashed = request.getfixturevalue(path)
    [(stage, reason, detail)] = crashed[SAMPLER_HIT]
    assert (stage, reason) == ("rollouts", "rollouts.sampler_error")
    assert "RuntimeError: planted crash in the sampler" in detail


@pytest.mark.parametrize("path", PATHS)
def test_a_later_verify_crash_rejects_its_task_once_as_a_verify_error(
    path: str, request: pytest.FixtureRequest
) -> None:
    _, crashed = request.getfixturevalue(path)
    [(stage, reason, detail)] = crashed[VERIFY_HIT]
    assert (stage, reason) == ("verify", "verify.error")
    assert "RuntimeError: planted crash in verify" in detail


@pytest.mark.parametrize("path", PATHS)
def test_the_other_tasks_are_unaffected(path: str, request: pytest.FixtureRequest) -> None:
    clean, crashed = request.getfixturevalue(path)
    assert {t: crashed[t] for t in BYSTANDERS} == {t: clean[t] for t in BYSTANDERS}
