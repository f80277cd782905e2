"""``pipeline.outputs.layout``: one run or a root of runs, found the same way by every reader."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tasksieve.pipeline.outputs.layout import NotAnOutput, RunLayout


def _run(where: Path, run_id: str = "r1") -> Path:
    where.mkdir(parents=True)
    (where / "manifest.json").write_text(json.dumps({"run_id": run_id, "counts": {}}))
    (where / "tasks").mkdir()
    (where / "tasks" / "part-0.parquet").write_bytes(b"")
    return where


def test_a_run_directory_is_its_own_run(tmp_path: Path) -> None:
    run = _run(tmp_path / "out")
    layout = RunLayout.find(run)
    assert (layout.run_dir, layout.run_prefix, layout.is_root) == (run, "", False)
    assert layout.raw["run_id"] == "r1" and layout.manifests_glob == "manifest.json"
    assert layout.shards("tasks") == [run / "tasks" / "part-0.parquet"]


def test_a_root_of_runs_reads_its_current_run(tmp_path: Path) -> None:
    _run(tmp_path / "runs" / "a", "a")
    _run(tmp_path / "runs" / "b", "b")
    os.symlink(os.path.join("runs", "b"), tmp_path / "current")
    layout = RunLayout.find(tmp_path)
    assert layout.is_root and layout.run_prefix == "current/"
    assert layout.raw["run_id"] == "b" and layout.manifests_glob == "runs/*/manifest.json"


def _missing(p: Path) -> None:
    pass


def _empty(p: Path) -> None:
    p.mkdir()


def _shards_only(p: Path) -> None:
    (p / "tasks").mkdir(parents=True)


def _not_json(p: Path) -> None:
    p.mkdir()
    (p / "manifest.json").write_text("{")


def _not_utf8(p: Path) -> None:
    p.mkdir()
    (p / "manifest.json").write_bytes(b"\xff\xfe{")


def _a_list(p: Path) -> None:
    p.mkdir()
    (p / "manifest.json").write_text("[1, 2]")


def _a_directory(p: Path) -> None:
    (p / "manifest.json").mkdir(parents=True)


def _runs_without_current(p: Path) -> None:
    _run(p / "runs" / "a")


def _current_without_runs(p: Path) -> None:
    _run(p / "elsewhere")
    os.symlink("elsewhere", p / "current")


def _dangling_current(p: Path) -> None:
    (p / "runs").mkdir(parents=True)
    os.symlink(os.path.join("runs", "gone"), p / "current")


@pytest.mark.parametrize(
    ("make", "why"),
    [
        (_missing, "no such directory"),
        (_empty, "no manifest.json"),
        (_shards_only, "no manifest.json"),
        (_not_json, "is not JSON"),
        (_not_utf8, "is not JSON"),
        (_a_list, "not a JSON object"),
        (_a_directory, "no manifest.json"),
        (_runs_without_current, "no manifest.json"),
        (_current_without_runs, "no manifest.json"),
        (_dangling_current, "no manifest.json"),
    ],
)
def test_what_is_not_an_output_is_refused_saying_why(
    tmp_path: Path, make: Callable[[Path], None], why: str
) -> None:
    target = tmp_path / "x"
    make(target)
    with pytest.raises(NotAnOutput, match="not a tasksieve output") as got:
        RunLayout.find(target)
    assert why in str(got.value) and str(target) in str(got.value)


def test_a_manifest_with_bad_fields_is_refused_when_validated(tmp_path: Path) -> None:
    run = tmp_path / "out"
    run.mkdir()
    (run / "manifest.json").write_text(json.dumps({"run_id": 7, "counts": "many"}))
    layout = RunLayout.find(run)  # the JSON reads; the fields are checked on use
    with pytest.raises(NotAnOutput, match="not a tasksieve output: not a tasksieve manifest"):
        _ = layout.manifest
