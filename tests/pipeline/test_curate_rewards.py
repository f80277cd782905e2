"""`tasksieve curate` scores every rollout with its task's reward spec (replay sampler)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tasksieve.pipeline.cli import main
from tasksieve.schemas import CuratedTask, RewardSpec, Verdict
from tasksieve.verifiers.rewards import Reward, reward
from tests.curate_flags import FAST

ROOT = Path(__file__).resolve().parents[2]
REPLAY = ROOT / "examples" / "replay" / "completions.jsonl"
FRACTION = {"kind": "fraction", "limits": {"weight": 0.5}}


def _inputs(dest: Path) -> dict[str, dict[str, Any]]:
    """The code examples, every other one with a fraction spec; returns specs by task id."""
    dest.mkdir()
    lines, specs = [], {}
    src = (ROOT / "examples" / "tasks" / "code.jsonl").read_text(encoding="utf-8")
    for i, line in enumerate(src.splitlines()):
        data = json.loads(line)
        if i % 2 == 0:
            data["reward"] = FRACTION
        specs[data["id"]] = data.get("reward", {})
        lines.append(json.dumps(data))
    (dest / "code.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return specs


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, dict[str, Any]]]:
    root = tmp_path_factory.mktemp("rewards")
    specs = _inputs(root / "in")
    out = root / "out"
    argv = ["curate", "--input", str(root / "in"), "--output", str(out), "--quiet"]
    argv += ["--sampler", "replay", "--replay", str(REPLAY), "--samples", "4", *FAST]
    assert main(argv) == 0
    return out, specs


def _rows(out: Path, sub: str) -> list[dict[str, Any]]:
    return [r for f in sorted((out / sub).rglob("*.parquet")) for r in pq.read_table(f).to_pylist()]


def test_every_rollout_carries_its_tasks_reward(run: tuple[Path, dict[str, Any]]) -> None:
    out, specs = run
    rows = _rows(out, "rollouts")
    assert rows
    for row in rows:
        spec = RewardSpec.model_validate(specs[row["task_id"]])
        verdict = Verdict.model_validate(row["verdict"])
        ratio = (row["reward_components"] or {}).get("runtime_ratio")
        reference = verdict.duration_s / ratio if ratio else None
        want = reward(verdict, spec, reference)
        assert isinstance(want, Reward), row["task_id"]
        assert row["reward"] == want.value
        assert row["reward_components"] == want.components.model_dump()


def test_fraction_tasks_get_partial_credit(run: tuple[Path, dict[str, Any]]) -> None:
    out, specs = run
    partial = [
        r
        for r in _rows(out, "rollouts")
        if specs[r["task_id"]] == FRACTION and 0.0 < r["reward"] < 1.0
    ]
    assert partial, "no fraction task got partial credit"
    assert all(r["verdict"]["status"] == "fail" for r in partial)


def test_binary_tasks_score_pass_as_one_else_zero(run: tuple[Path, dict[str, Any]]) -> None:
    out, specs = run
    binary = [r for r in _rows(out, "rollouts") if not specs[r["task_id"]]]
    assert binary
    for r in binary:
        assert r["reward"] == (1.0 if r["verdict"]["status"] == "pass" else 0.0)


def test_kept_rows_carry_the_reward_spec(run: tuple[Path, dict[str, Any]]) -> None:
    out, specs = run
    kept = _rows(out, "tasks")
    assert kept
    for row in kept:
        back = CuratedTask.model_validate(row).task_record()
        assert back.reward == RewardSpec.model_validate(specs[row["id"]])
