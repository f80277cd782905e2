"""Small real curate runs for the catalog and query tests (replay sampler, no model)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from tasksieve.pipeline.cli import main
from tests.curate_flags import FAST

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "tasks"
REPLAY = ROOT / "examples" / "replay" / "completions.jsonl"
SNAPSHOTS = ROOT / "examples" / "snapshots"

# file -> 1-based lines: per family one too easy, kept and too hard task; code.flatten and
# code.word_frequencies so that the near and exact duplicates of problems.jsonl have their
# originals; every deliberately bad line.
SUBSET: dict[str, list[int]] = {
    "api.jsonl": [1, 2, 5],
    "code.jsonl": [1, 6, 8, 9, 11],
    "config.jsonl": [1, 3, 5],
    "sql.jsonl": [1, 3, 5],
    "problems.jsonl": list(range(1, 10)),
    "repo.jsonl": [1, 12],
}
# Only lines the validate stage rejects: a run that keeps nothing and samples nothing.
ALL_REJECTED: dict[str, list[int]] = {"problems.jsonl": [6, 7, 8, 9]}


def curate_lines(tmp: Path, lines: dict[str, list[int]]) -> Path:
    """Curate the chosen example lines into ``tmp/out``; return the output directory."""
    inputs = tmp / "in"
    inputs.mkdir()
    for name, wanted in lines.items():
        text = (EXAMPLES / name).read_text(encoding="utf-8").splitlines()
        (inputs / name).write_text("".join(text[i - 1] + "\n" for i in wanted), "utf-8")
    out = tmp / "out"
    argv = ["curate", "--input", str(inputs), "--output", str(out), "--sampler", "replay"]
    argv += ["--snapshot-store", str(SNAPSHOTS)]
    assert main([*argv, "--replay", str(REPLAY), "--samples", "4", "--quiet", *FAST]) == 0
    return out


def parquet_rows(out: Path, sub: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for f in sorted((out / sub).rglob("*.parquet")):
        rows.extend(pq.read_table(f).to_pylist())
    return rows


def manifest(out: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((out / "manifest.json").read_text())
    return data


# A quick run for the query command: one kept and one too easy SQL task, one kept code task,
# and lines the validate stage rejects.
SMALL: dict[str, list[int]] = {
    "sql.jsonl": [1, 3],
    "code.jsonl": [6],
    "problems.jsonl": [6, 7, 8, 9],
}
