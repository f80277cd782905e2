"""Multi-turn eval: success by turn from episodes replayed turn by turn."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tasksieve.pipeline.cli import main
from tests.eval.conftest import EXAMPLES

pytestmark = pytest.mark.slow

WRONG = "```python\ndef add(a, b):\n    return a - b\n```"
RIGHT = "```python\ndef add(a, b):\n    return a + b\n```"


def test_success_by_turn_counts_episodes_fixed_after_feedback(tmp_path: Path) -> None:
    task = next(line for line in (EXAMPLES / "code.jsonl").read_text().splitlines())
    assert json.loads(task)["id"] == "code.add"
    (tmp_path / "t.jsonl").write_text(task + "\n")
    rows = [
        {"task_id": "code.add", "completion": WRONG},  # episode 0: fixed at turn 2
        {"task_id": "code.add", "completion": RIGHT},  # episode 1: right at once
        {"task_id": "code.add", "completion": WRONG},  # episode 2: wrong twice
        {"task_id": "code.add", "turn": 2, "episode": 0, "completion": RIGHT},
        {"task_id": "code.add", "turn": 2, "episode": 2, "completion": WRONG},
    ]
    (tmp_path / "r.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out"
    argv = ["eval", "-i", str(tmp_path / "t.jsonl"), "-o", str(out), "--sampler", "replay"]
    argv += ["--replay", str(tmp_path / "r.jsonl"), "-n", "3", "--turns", "2", "--quiet"]
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(argv) == 0
    (score,) = pq.read_table(out / "scores").to_pylist()
    assert (score["n"], score["c"], score["c_by_turn"], score["attempts"]) == (3, 2, [1, 2], 5)
    assert score["fail_wrong"] == 3
    turns = json.loads((out / "summary.json").read_text())["overall"]["success_by_turn"]
    assert [t["success"] for t in turns] == pytest.approx([1 / 3, 2 / 3])
