"""``pipeline.outputs.publish``: ROOT/current swapped atomically, only onto finished runs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tasksieve.pipeline.outputs.layout import NotAnOutput
from tasksieve.pipeline.outputs.publish import NotPublishable, point_current, published_run


def make_run(root: Path, name: str, checks: bool | None = True) -> Path:
    run = root / "runs" / name
    run.mkdir(parents=True)
    (run / "manifest.json").write_text(json.dumps({"run_id": name, "counts": {}}))
    if checks is not None:
        (run / "checks.json").write_text(json.dumps({"success": checks, "results": []}))
    return run


def test_current_is_a_relative_link_to_the_run(tmp_path: Path) -> None:
    run = make_run(tmp_path, "r1")
    current = point_current(tmp_path, run, require_checks=True)
    assert os.readlink(current) == os.path.join("runs", "r1")
    assert published_run(tmp_path) == run.resolve()


def test_publishing_again_swaps_the_link_and_keeps_the_old_run(tmp_path: Path) -> None:
    r1, r2 = make_run(tmp_path, "r1"), make_run(tmp_path, "r2")
    point_current(tmp_path, r1, require_checks=True)
    point_current(tmp_path, r2, require_checks=True)
    assert published_run(tmp_path) == r2.resolve()
    assert (r1 / "manifest.json").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["current", "runs"]  # no temp links


@pytest.mark.parametrize(
    ("checks", "require", "message"),
    [
        (None, True, "no checks.json"),
        (False, True, "checks failed"),
    ],
)
def test_unchecked_or_failed_run_is_refused_and_current_kept(
    tmp_path: Path, checks: bool | None, require: bool, message: str
) -> None:
    good = make_run(tmp_path, "good")
    point_current(tmp_path, good, require_checks=True)
    bad = make_run(tmp_path, "bad", checks=checks)
    with pytest.raises(NotPublishable, match=message):
        point_current(tmp_path, bad, require_checks=require)
    assert published_run(tmp_path) == good.resolve()


def test_unchecked_run_is_published_when_checks_are_off(tmp_path: Path) -> None:
    run = make_run(tmp_path, "r1", checks=None)
    point_current(tmp_path, run, require_checks=False)
    assert published_run(tmp_path) == run.resolve()


def test_run_without_manifest_is_refused(tmp_path: Path) -> None:
    run = make_run(tmp_path, "r1")
    (run / "manifest.json").unlink()
    with pytest.raises(NotAnOutput, match=r"not a tasksieve output: no manifest\.json"):
        point_current(tmp_path, run, require_checks=False)
    assert not (tmp_path / "current").exists()


@pytest.mark.parametrize("where", ["elsewhere/r1", "runs/nested/r1", "r1"])
def test_directory_outside_root_runs_is_refused(tmp_path: Path, where: str) -> None:
    run = tmp_path / where
    run.mkdir(parents=True)
    (run / "manifest.json").write_text("{}")
    with pytest.raises(NotPublishable, match="not a run directory"):
        point_current(tmp_path, run, require_checks=False)


def test_a_real_directory_named_current_is_not_replaced(tmp_path: Path) -> None:
    run = make_run(tmp_path, "r1")
    (tmp_path / "current").mkdir()
    (tmp_path / "current" / "data").write_text("keep me")
    with pytest.raises(NotPublishable, match="not a symlink"):
        point_current(tmp_path, run, require_checks=True)
    assert (tmp_path / "current" / "data").read_text() == "keep me"


def test_nothing_published_yet(tmp_path: Path) -> None:
    assert published_run(tmp_path) is None
