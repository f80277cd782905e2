"""Shared by the eval tests: one curate run of every example family and two evals of it.

Everything here uses the replay sampler (examples/replay/completions.jsonl), so no model is
needed: eval A replays the recorded completions; eval B replays them with every code
completion replaced by one that fails, so B must lose exactly the code tasks A solved.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tasksieve.pipeline.cli import main
from tests.curate_flags import FAST
from tests.pipeline.catalog_runs import SNAPSHOTS, SUBSET

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "tasks"
REPLAY = ROOT / "examples" / "replay" / "completions.jsonl"
FAILING_CODE = "```python\nraise SystemExit(0)\n```"


def eval_argv(src: Path, out: Path, replay: Path, *extra: str) -> list[str]:
    return [
        "eval", "--input", str(src), "--output", str(out), "--sampler", "replay",
        "--replay", str(replay), "--samples", "4", "--k", "1,2,4", "--quiet",
        "--format", "json", *extra,
    ]  # fmt: skip


@pytest.fixture(scope="package")
def curated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Examples of every family (the catalog tests' subset) curated with the replay sampler."""
    root = tmp_path_factory.mktemp("eval-curate")
    inputs, out = root / "in", root / "out"
    inputs.mkdir()
    for name, wanted in SUBSET.items():
        text = (EXAMPLES / name).read_text(encoding="utf-8").splitlines()
        (inputs / name).write_text("".join(text[i - 1] + "\n" for i in wanted), "utf-8")
    argv = ["curate", "--input", str(inputs), "--output", str(out), "--quiet", *FAST]
    argv += ["--snapshot-store", str(SNAPSHOTS)]
    argv += ["--reference-runs", "1"]  # the gates are not what these tests measure
    assert main([*argv, "--sampler", "replay", "--replay", str(REPLAY), "--samples", "4"]) == 0
    return out


@pytest.fixture(scope="package")
def worse_replay(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The recorded completions with every code completion replaced by a failing one."""
    path = tmp_path_factory.mktemp("eval-replay") / "worse.jsonl"
    lines = []
    for line in REPLAY.read_text().splitlines():
        row = json.loads(line)
        if row["task_id"].startswith("code."):
            row["completion"] = FAILING_CODE
        lines.append(json.dumps(row))
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="package")
def eval_a(curated: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("eval-a") / "out"
    assert main(eval_argv(curated, out, REPLAY)) == 0
    return out


@pytest.fixture(scope="package")
def eval_b(curated: Path, worse_replay: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("eval-b") / "out"
    assert main(eval_argv(curated, out, worse_replay)) == 0
    return out
