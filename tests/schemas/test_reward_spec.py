"""The task's ``reward`` spec: default binary, strict types, validated weights and caps."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from pydantic import ValidationError

from tasksieve.schemas import CuratedTask, Lineage, RewardSpec, TaskRecord
from tasksieve.schemas.records import DEFAULT_REWARD_JSON

TASK: dict[str, Any] = {
    "id": "code.f",
    "family": "code",
    "prompt": "Write f.",
    "verifier": {"family": "code", "style": "asserts", "entry_point": "f", "asserts": ["1"]},
    "reference_solution": "def f():\n    return 1\n",
}


def _task(reward: Any) -> TaskRecord:
    data = copy.deepcopy(TASK)
    data["reward"] = reward
    return TaskRecord.model_validate(data)


def test_default_is_binary_without_penalties() -> None:
    spec = TaskRecord.model_validate(TASK).reward
    assert spec == RewardSpec(kind="binary", runtime=None, limits=None)


def test_full_spec_is_accepted() -> None:
    spec = _task(
        {
            "kind": "fraction",
            "runtime": {"over": 3, "weight": 0.2, "cap": 0.4},
            "limits": {"weight": 0.5, "limits": ["memory", "output"]},
        }
    ).reward
    assert spec.kind == "fraction"
    assert spec.runtime is not None and spec.runtime.over == 3.0
    assert spec.limits is not None and spec.limits.limits == ["memory", "output"]


@pytest.mark.parametrize(
    ("reward", "where"),
    [
        ({"kind": "partial"}, "kind"),
        ({"kind": 1}, "kind"),
        ({"kind": "binary", "bonus": 1}, "bonus"),
        ({"runtime": {"over": 0.5}}, "over"),  # faster than the reference is not a penalty
        ({"runtime": {"over": "2"}}, "over"),
        ({"runtime": {"weight": 0}}, "weight"),
        ({"runtime": {"weight": 1.5}}, "weight"),
        ({"runtime": {"weight": -0.1}}, "weight"),
        ({"runtime": {"cap": 0}}, "cap"),
        ({"runtime": {"cap": 2}}, "cap"),
        ({"runtime": {"cap": True}}, "cap"),
        ({"runtime": {"over": float("nan")}}, "over"),
        ({"runtime": {"over": float("inf")}}, "over"),
        ({"limits": {"weight": 2}}, "weight"),
        ({"limits": {"limits": []}}, "limits"),
        ({"limits": {"limits": ["disk"]}}, "limits"),
        ({"limits": {"limits": "wall"}}, "limits"),
        ("binary", "reward"),
        (None, "reward"),
    ],
)
def test_bad_spec_is_refused(reward: Any, where: str) -> None:
    with pytest.raises(ValidationError) as err:
        _task(reward)
    assert where in str(err.value)


def _row(task: TaskRecord) -> CuratedTask:
    return CuratedTask(
        id=task.id,
        family=task.family,
        prompt=task.prompt,
        verifier=json.dumps(task.verifier.model_dump(mode="json")),
        reference_solution=task.reference_solution,
        source_dataset=task.source.dataset,
        source_license=task.source.license,
        reward=json.dumps(task.reward.model_dump(mode="json")),
        n=4,
        k=2,
        n_requested=4,
        pass_rate=0.5,
        ci_low=0.1,
        ci_high=0.9,
        difficulty="keep",
        lineage=Lineage(
            source_file="f", source_line=1, input_sha256="x", run_id="r", config_fingerprint="c"
        ),
    )


def test_spec_round_trips_through_the_kept_row() -> None:
    task = _task({"kind": "fraction", "runtime": {"over": 4}})
    assert _row(task).task_record() == task


def test_default_reward_column_is_the_binary_spec() -> None:
    assert RewardSpec.model_validate(json.loads(DEFAULT_REWARD_JSON)) == RewardSpec()
