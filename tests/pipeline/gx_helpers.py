"""Shared by the data-quality tests: one real curate run per session, and shard rewriting."""

from __future__ import annotations

import contextlib
import io
import shutil
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tasksieve.pipeline.cli import main
from tests.curate_flags import FAST

ROOT = Path(__file__).resolve().parents[2]
# Kept tasks, rejected records of several stages and rollouts, in a few seconds of sampling.
PROBLEMS = ROOT / "examples" / "tasks" / "problems.jsonl"
REPLAY = ROOT / "examples" / "replay" / "completions.jsonl"

_RUNS: dict[str, Path] = {}


def curate(inputs: Path, out: Path, *extra: str) -> int:
    """``tasksieve curate`` with the replay sampler (stdout swallowed)."""
    argv = ["curate", "--input", str(inputs), "--output", str(out), "--sampler", "replay"]
    argv += ["--replay", str(REPLAY), "--samples", "4", "--quiet", *FAST, *extra]
    with contextlib.redirect_stdout(io.StringIO()):
        return main(argv)


def shared_run(factory: pytest.TempPathFactory) -> Path:
    """One curate run of problems.jsonl with --expectations, made once per test session."""
    if "problems" not in _RUNS:
        out = factory.mktemp("gx-run") / "out"
        assert curate(PROBLEMS, out, "--expectations") == 0
        _RUNS["problems"] = out
    return _RUNS["problems"]


def copy_run(run: Path, dest: Path) -> Path:
    """A writable copy of a run (without its check results), to corrupt."""
    out = dest / "copy"
    shutil.copytree(run, out, ignore=shutil.ignore_patterns("gx", "checks.json"))
    return out


def rewrite(
    out: Path, kind: str, change: Callable[[pa.Table], pa.Table], every: bool = False
) -> None:
    """Rewrite the first non-empty shard of ``kind`` (or ``every`` shard) through ``change``,
    keeping its schema metadata."""
    for f in sorted((out / kind).rglob("*.parquet")):
        table = pq.read_table(f)
        if not every and table.num_rows == 0:
            continue
        new = change(table)
        pq.write_table(new.replace_schema_metadata(table.schema.metadata), f)
        if not every:
            return


def set_values(column: str, values: Callable[[list[object]], list[object]], typ: object = None):
    """A ``change`` that replaces one column by ``values(old)``, of its type or ``typ``."""

    def change(table: pa.Table) -> pa.Table:
        if table.num_rows == 0:
            return table
        i = table.schema.get_field_index(column)
        field = table.schema.field(i)
        new_type = typ or field.type
        array = pa.array(values(table.column(column).to_pylist()), type=new_type)
        return table.set_column(i, pa.field(column, new_type), array)

    return change
