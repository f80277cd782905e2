"""Adaptive rollouts in Beam with the replay sampler and the real verifiers, all four families.

Each family's first example task appears twice: ``<id>.easy`` whose recorded completions all
pass (settled ``too_easy`` by a streak of 4 after the first round) and ``<id>.mixed`` whose
completions fail, fail, fail, pass, then fail, pass, ... (in the band (0.1, 0.9) once two
passes and two failures are in: after the second round).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import apache_beam as beam
import pytest
from apache_beam.metrics.metric import MetricsFilter

from tasksieve.schemas import TaskRecord
from tasksieve.transforms.algorithms.adaptive_stopping import AdaptiveConfig
from tasksieve.transforms.algorithms.stats import BandConfig
from tasksieve.transforms.rollouts.adaptive import AdaptiveRollouts
from tasksieve.transforms.rollouts.rounds import ROLLOUTS, Rollouts, Verify
from tasksieve.transforms.runtime.common import NAMESPACE, REJECTED
from tasksieve.transforms.runtime.items import Item, Scored
from tasksieve.transforms.samplers import SamplerConfig
from tasksieve.verifiers import SandboxConfig

ROOT = Path(__file__).resolve().parents[2]
FAMILIES = ("code", "sql", "config", "api")
BAND = BandConfig(0.1, 0.9)
MIXED = [False, False, False, True, False, True, False, False] + [True, False] * 4
SANDBOX = SandboxConfig(allow_weak_isolation=True, workers=2)


def first_task(family: str) -> TaskRecord:
    for line in (ROOT / "examples" / "tasks" / f"{family}.jsonl").read_text().splitlines():
        try:
            return TaskRecord.model_validate_json(line)
        except ValueError:
            continue  # the examples hold malformed records on purpose
    raise AssertionError(f"no valid {family} example")


def completion(task: TaskRecord, passes: bool) -> str:
    return f"```\n{task.reference_solution}\n```" if passes else "I am not sure how to do this."


def write_replay(path: Path, streams: dict[str, tuple[TaskRecord, list[bool]]]) -> None:
    rows = [
        {"task_id": tid, "completion": completion(task, ok)}
        for tid, (task, stream) in streams.items()
        for ok in stream
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def items(streams: dict[str, tuple[TaskRecord, list[bool]]]) -> list[Item]:
    return [
        Item(task.model_copy(update={"id": tid}), "in.jsonl", i, "0" * 64)
        for i, (tid, (task, _)) in enumerate(streams.items(), start=1)
    ]


def summary(out: dict[str, Any]) -> dict[str, tuple[int, int, int]]:
    """Per task: (k, n, n_requested) of its Scored row."""
    return {s.item.id: (s.k, s.n, s.requested) for s in out["ok"]}


def run(stage: beam.PTransform, inputs: list[Item], fixed: bool = False) -> dict[str, Any]:
    """Run the stage (fixed: Rollouts + Verify) and collect its outputs and counters."""
    _SINK.clear()
    p = beam.Pipeline(runner="DirectRunner")
    src = p | beam.Create(inputs)
    out = (src | "Fixed" >> stage)["ok"] | Verify(SANDBOX, "run", BAND) if fixed else src | stage
    for name in ("ok", ROLLOUTS, REJECTED):
        _ = out[name] | f"Collect{name}" >> beam.Map(_collect, name)
    result = p.run()
    result.wait_until_finish()
    found = result.metrics().query(MetricsFilter().with_namespace(NAMESPACE))["counters"]
    got = {name: list(_SINK.get(name, [])) for name in ("ok", ROLLOUTS, REJECTED)}
    counters: Counter[str] = Counter()
    for c in found:  # one entry per step: each round's stage counts its own
        counters[c.key.metric.name] += c.committed
    return {**got, "counters": dict(counters)}


_SINK: dict[str, list[Any]] = {}
"""What ``run`` collected (the DirectRunner runs in this process)."""


def _collect(element: Any, name: str) -> None:
    _SINK.setdefault(name, []).append(element)


@pytest.fixture(scope="module")
def adaptive(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    streams = {}
    for family in FAMILIES:
        task = first_task(family)
        streams[f"{task.id}.easy"] = (task, [True] * 16)
        streams[f"{task.id}.mixed"] = (task, MIXED)
    replay = tmp_path_factory.mktemp("replay") / "r.jsonl"
    write_replay(replay, streams)
    sampler = SamplerConfig(backend="replay", replay_path=str(replay), samples=16)
    cfg = AdaptiveConfig(max_samples=16, first_round=4, round_size=4, streak=4)
    out = run(AdaptiveRollouts(sampler, cfg, SANDBOX, "run", BAND), items(streams))
    return {**out, "streams": streams}


@pytest.mark.parametrize("family", FAMILIES)
def test_a_clearly_easy_task_stops_after_the_first_round(
    adaptive: dict[str, Any], family: str
) -> None:
    assert summary(adaptive)[f"{first_task(family).id}.easy"] == (4, 4, 4)


@pytest.mark.parametrize("family", FAMILIES)
def test_an_in_band_task_samples_until_its_label_is_certain(
    adaptive: dict[str, Any], family: str
) -> None:
    assert summary(adaptive)[f"{first_task(family).id}.mixed"] == (2, 8, 8)


def test_rollout_rows_are_the_recorded_samples_in_index_order(adaptive: dict[str, Any]) -> None:
    """Sample i of a task is its i-th recorded completion, whichever round drew it."""
    by_task: dict[str, list[tuple[int, str]]] = {}
    for row in adaptive[ROLLOUTS]:
        by_task.setdefault(row["task_id"], []).append((row["sample_index"], row["completion"]))
    for tid, (task, stream) in adaptive["streams"].items():
        rows = sorted(by_task[tid])
        assert [i for i, _ in rows] == list(range(len(rows)))
        assert [c for _, c in rows] == [completion(task, ok) for ok in stream[: len(rows)]]


def test_the_counters_say_what_was_drawn_and_saved(adaptive: dict[str, Any]) -> None:
    c = adaptive["counters"]
    assert c["adaptive.samples_drawn"] == 4 * (4 + 8)
    assert c["adaptive.samples_saved"] == 4 * (12 + 8)
    assert c["adaptive.stopped_early"] == 8
    assert (c["adaptive.stopped_round_1"], c["adaptive.stopped_round_2"]) == (4, 4)
    assert adaptive[REJECTED] == []


def test_passing_samples_keep_their_indices(adaptive: dict[str, Any]) -> None:
    """The Ambiguity stage gets every passing sample with its index across rounds."""
    scored: dict[str, Scored] = {s.item.id: s for s in adaptive["ok"]}
    mixed = scored[f"{first_task('code').id}.mixed"]
    assert [i for i, _ in mixed.passing] == [3, 5]


def test_a_replay_that_runs_out_scores_what_it_has(tmp_path: Path) -> None:
    """6 recorded samples of 16: round 2 comes back short; the task is scored on 6."""
    task = first_task("code")
    streams = {"short": (task, [False] * 6)}
    write_replay(tmp_path / "r.jsonl", streams)
    sampler = SamplerConfig(backend="replay", replay_path=str(tmp_path / "r.jsonl"), samples=16)
    out = run(AdaptiveRollouts(sampler, AdaptiveConfig(16), SANDBOX, "run", BAND), items(streams))
    assert summary(out) == {"short": (0, 6, 8)}
    assert out["counters"]["rollouts.samples_missing"] == 10
    assert "adaptive.samples_saved" not in out["counters"]


def test_a_task_with_no_recorded_sample_is_rejected(tmp_path: Path) -> None:
    task = first_task("code")
    write_replay(tmp_path / "r.jsonl", {"other": (task, [True])})
    sampler = SamplerConfig(backend="replay", replay_path=str(tmp_path / "r.jsonl"), samples=8)
    stage = AdaptiveRollouts(sampler, AdaptiveConfig(8), SANDBOX, "run", BAND)
    out = run(stage, items({"none": (task, [])}))
    assert [(r["reason"], r["n_requested"]) for r in out[REJECTED]] == [("rollouts.no_samples", 4)]


def test_default_band_labels_like_fixed_k_on_the_same_samples(tmp_path: Path) -> None:
    """Without a streak, adaptive and fixed K=8 give every task the same label."""
    task = first_task("code")
    streams = {
        "fail": (task, [False] * 8),
        "late": (task, [False] * 7 + [True]),
        "early": (task, [True, False] * 4),
        "pass": (task, [True] * 8),
    }
    write_replay(tmp_path / "r.jsonl", streams)
    sampler = SamplerConfig(backend="replay", replay_path=str(tmp_path / "r.jsonl"), samples=8)
    default = BandConfig()
    cfg = AdaptiveConfig(8, first_round=2, round_size=2)
    got = summary(run(AdaptiveRollouts(sampler, cfg, SANDBOX, "run", default), items(streams)))
    fixed = summary(run(Rollouts(sampler, "run"), items(streams), fixed=True))
    assert {t: default.classify(k / n) for t, (k, n, _) in got.items()} == {
        t: default.classify(k / n) for t, (k, n, _) in fixed.items()
    }
    assert {t: n for t, (_, n, _) in got.items()} == {"fail": 8, "late": 8, "early": 2, "pass": 8}


def test_max_samples_must_be_the_sampler_samples() -> None:
    sampler = SamplerConfig(backend="replay", replay_path="r.jsonl", samples=8)
    with pytest.raises(ValueError, match="--samples is the maximum"):
        AdaptiveRollouts(sampler, AdaptiveConfig(16), SANDBOX, "run", BAND)
