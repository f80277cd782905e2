"""Per-task scores from rollout rows: n and c, episodes by turn, failure kinds, cost."""

from __future__ import annotations

from typing import Any

import pytest

from tasksieve.pipeline.eval.scores import bucket, failure_kind, task_score, task_scores
from tasksieve.pipeline.eval.summary import summarise
from tasksieve.schemas import Rollout, Verdict

META = {"task_id": "t", "family": "code", "source": "s", "curated_pass_rate": 0.5}


def row(
    index: int, status: str, turn: int = 1, solution: str = "x = 1", **extra: Any
) -> dict[str, Any]:
    reward = None if status == "infra_error" else float(status == "pass")
    comps = None if reward is None else {"kind": "binary", "base": reward}
    return Rollout(
        task_id="t",
        family="code",
        sample_index=index,
        model_id="m",
        sampler="replay",
        completion=solution,
        solution=solution,
        verdict=Verdict(status=status, duration_s=0.5),  # type: ignore[arg-type]
        run_id="r",
        reward=reward,
        reward_components=comps,  # type: ignore[arg-type]
        turn=turn,
        **extra,
    ).model_dump()


def test_one_turn_counts_leave_infra_errors_out_of_n() -> None:
    rows = [row(0, "pass"), row(1, "fail"), row(2, "infra_error"), row(3, "timeout")]
    s = task_score(rows, META, [1, 2], 1)
    assert (s["n"], s["c"], s["attempts"]) == (3, 1, 4)
    assert s["pass_at_1"] == pytest.approx(1 / 3)
    assert (s["fail_wrong"], s["fail_timeout"], s["fail_infra"]) == (1, 1, 1)
    assert s["sandbox_s"] == 2.0 and s["reward"] == 1 / 3 and s["bucket"] == "medium"


def test_episodes_count_success_by_turn() -> None:
    rows = [
        row(0, "fail", 1), row(0, "pass", 2),  # solved at turn 2
        row(1, "pass", 1),  # solved at once
        row(2, "fail", 1), row(2, "error", 2), row(2, "fail", 3),  # never
    ]  # fmt: skip
    s = task_score(rows, META, [1], 3)
    assert s["n"] == 3 and s["c_by_turn"] == [1, 2, 2] and s["c"] == 2


def test_protocol_failures_are_missing_or_cut_off_answers() -> None:
    assert failure_kind(row(0, "fail", solution="")) == "protocol"
    assert failure_kind(row(0, "error", finish_reason="length")) == "protocol"
    assert failure_kind(row(0, "error")) == "error"
    assert failure_kind(row(0, "pass", finish_reason="length")) is None


def test_buckets() -> None:
    assert [bucket(p) for p in (None, 0.0, 0.3, 0.75, 1.0)] == [
        "uncalibrated", "hard", "medium", "easy", "easy",
    ]  # fmt: skip


def test_rejected_tasks_are_not_scored_and_summary_groups() -> None:
    metas = [META, {**META, "task_id": "u"}]
    scores = task_scores([row(0, "pass")], metas, {"u"}, [1], 1)
    assert [s["task_id"] for s in scores] == ["t"]
    summary = summarise(scores, [1], resamples=200)
    assert summary["overall"]["pass_at_k"]["1"]["value"] == 1.0
    assert set(summary["by_family"]) == {"code"} and summary["by_bucket"]["medium"]["tasks"] == 1
    assert summary["overall"]["sandbox_s"]["per_solved_task"] == 0.5
