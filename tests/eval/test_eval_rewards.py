"""Eval reports every reward component: test weights and the style measured by ruff."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tasksieve.pipeline.cli import main

pytestmark = pytest.mark.slow

TASK = {
    "id": "code.clamp",
    "family": "code",
    "prompt": "Write clamp(x, lo, hi) returning x limited to the range [lo, hi].",
    "verifier": {
        "family": "code",
        "style": "asserts",
        "entry_point": "clamp",
        "asserts": [
            "assert clamp(5, 0, 10) == 5",
            "assert clamp(-1, 0, 10) == 0",
            "assert clamp(11, 0, 10) == 10",
            "assert clamp(10, 0, 10) == 10",
        ],
    },
    "reference_solution": "def clamp(x, lo, hi):\n    return max(lo, min(x, hi))\n",
    "reward": {
        "kind": "fraction",
        "test_weights": [{"tag": "edge", "checks": ["assert_3"], "weight": 3.0}],
        "style": {"weight": 0.2, "per_line_cap": 0.5},
    },
}
CLEAN = "```python\ndef clamp(x, lo, hi):\n    return max(lo, min(x, hi))\n```"
# passes all but the edge case, with an unused import (one violation in 3 code lines)
MESSY = (
    "```python\nimport os\ndef clamp(x, lo, hi):\n"
    "    return max(lo, min(x, hi)) if x != hi else hi - 1\n```"
)


def test_components_per_task_with_weights_and_style(tmp_path: Path) -> None:
    (tmp_path / "tasks.jsonl").write_text(json.dumps(TASK) + "\n")
    replay = tmp_path / "replay.jsonl"
    rows = [{"task_id": "code.clamp", "completion": c} for c in (CLEAN, MESSY)]
    replay.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out"
    argv = ["eval", "-i", str(tmp_path / "tasks.jsonl"), "-o", str(out), "--sampler", "replay"]
    argv += ["--replay", str(replay), "--samples", "2", "--quiet"]
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(argv) == 0
    rollouts = sorted(pq.read_table(out / "rollouts").to_pylist(), key=lambda r: r["sample_index"])
    clean, messy = (r["reward_components"] for r in rollouts)
    assert clean["style_checked"] and clean["style_violations"] == 0 and clean["base"] == 1.0
    assert messy["style_violations"] == 1 and messy["base"] == pytest.approx(3 / 6)
    assert messy["style_penalty"] == pytest.approx(0.2 * (1 / 3) / 0.5)
    (score,) = pq.read_table(out / "scores").to_pylist()
    assert score["reward_style_penalty"] == pytest.approx(messy["style_penalty"] / 2)
    assert score["reward_base"] == pytest.approx((1.0 + 0.5) / 2)
