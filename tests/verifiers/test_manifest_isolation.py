"""The curation manifest records the isolation each worker's sandbox really had."""

from __future__ import annotations

import json
from pathlib import Path

from tasksieve.pipeline.cli import main
from tests.curate_flags import FAST

ROOT = Path(__file__).resolve().parents[2]


def test_manifest_lists_the_workers_sandboxes(tmp_path: Path) -> None:
    out = tmp_path / "out"
    tasks = ROOT / "examples" / "tasks"  # two families are enough to start the workers' sandboxes
    inputs = [str(tasks / "code.jsonl"), str(tasks / "sql.jsonl")]
    args = ["curate", "--input", *inputs, "--output", str(out)]
    replay = str(ROOT / "examples" / "replay" / "completions.jsonl")
    assert (
        main([*args, "--sampler", "replay", "--replay", replay, "--samples", "2", "--quiet", *FAST])
        == 0
    )
    sandbox = json.loads((out / "manifest.json").read_text())["sandbox"]
    used = sandbox["used_by_workers"]
    assert used and all(u["processes"] >= 1 for u in used), sandbox
    for u in used:
        assert u["backend"] == "process" and u["isolation"] in ("bwrap", "unshare-mount"), u
        assert u["filesystem_isolated"] is True and u["weak"] is False, u
