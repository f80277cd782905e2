"""Shared helpers for the training tests: a small curate run made with the replay sampler."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tasksieve.pipeline.cli import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "tasks"
REPLAY = ROOT / "examples" / "replay" / "completions.jsonl"
FAMILY_FILES = ("code.jsonl", "sql.jsonl")


def curate_small(dest: Path) -> Path:
    """Curate the code and SQL examples with the replay sampler into ``dest/out``."""
    inputs = dest / "in"
    inputs.mkdir(parents=True)
    for name in FAMILY_FILES:
        shutil.copy(EXAMPLES / name, inputs / name)
    out = dest / "out"
    argv = ["curate", "--input", str(inputs), "--output", str(out), "--quiet"]
    argv += ["--sampler", "replay", "--replay", str(REPLAY), "--samples", "4"]
    assert main(argv) == 0
    return out


@pytest.fixture(scope="package")
def curated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One small curate run shared by the training tests (read-only)."""
    return curate_small(tmp_path_factory.mktemp("train-curate"))
