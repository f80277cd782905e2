"""The one rollout round every path is built of: request, sample, join, (verify)."""

from __future__ import annotations

import json
from pathlib import Path

import apache_beam as beam
import pytest
from apache_beam.testing.util import assert_that, equal_to

from tasksieve.transforms.rollouts.rollout_round import RolloutRound, task_request
from tasksieve.transforms.runtime.common import REJECTED
from tasksieve.transforms.runtime.items import Item
from tasksieve.transforms.samplers import SamplerConfig, SampleRequest, Samples
from tests.transforms.add_task import add_task

GOOD = "def add(a, b):\n    return a + b\n"


def _item(i: int) -> Item:
    task = add_task(GOOD).model_copy(update={"id": f"t.add{i}"})
    return Item(task, "f.jsonl", i + 1, f"{i:064d}")


@pytest.fixture
def sampler(tmp_path: Path) -> SamplerConfig:
    path = tmp_path / "r.jsonl"
    rows = [{"task_id": f"t.add{i}", "completion": f"c{i}{j}"} for i in range(3) for j in range(2)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return SamplerConfig(backend="replay", replay_path=str(path), samples=2)


def _task_id(item: Item) -> str:
    return item.id


def _completions(item: Item, answers: list[Samples]) -> tuple[str, list[str]]:
    return item.id, [c for a in answers for c in a.completions]


def _requests_but_one(item: Item) -> list[tuple[str, SampleRequest]]:
    if item.id == "t.add1":
        raise RuntimeError("no request for this one")
    return task_request(item)


def test_a_round_without_verify_pairs_each_element_with_its_answers(
    sampler: SamplerConfig,
) -> None:
    with beam.Pipeline() as p:
        out = (
            p
            | beam.Create([_item(i) for i in range(3)])
            | RolloutRound(sampler, "run", requests=task_request, key=_task_id, pair=_completions)
        )
        want = [(f"t.add{i}", [f"c{i}0", f"c{i}1"]) for i in range(3)]
        assert_that(out["ok"], equal_to(want))
        assert_that(out[REJECTED], equal_to([]), label="NoRejects")


def _failed(item: Item, answers: list[Samples]) -> tuple[str, bool]:
    (got,) = answers
    return item.id, got.error is not None


def test_a_request_that_raises_fails_only_its_task(sampler: SamplerConfig) -> None:
    with beam.Pipeline() as p:
        out = (
            p
            | beam.Create([_item(i) for i in range(3)])
            | RolloutRound(sampler, "run", requests=_requests_but_one, key=_task_id, pair=_failed)
        )
        want = [("t.add0", False), ("t.add1", True), ("t.add2", False)]
        assert_that(out["ok"], equal_to(want))
