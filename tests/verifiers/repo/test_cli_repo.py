"""``tasksieve verify`` on a repo task: where the snapshot store comes from, and its errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tasksieve.pipeline.cli import main
from tasksieve.verifiers.families.repo.snapshots import SnapshotStore
from tests.verifiers.repo.repo_fixture import build_repo, make_task


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, Path]:
    monkeypatch.delenv("TASKSIEVE_SNAPSHOT_STORE", raising=False)
    store = SnapshotStore(tmp_path / "store")
    task = make_task(store, build_repo(tmp_path / "repo"))
    (tmp_path / "tasks").mkdir()
    task_file = tmp_path / "tasks" / "task.json"
    task_file.write_text(task.model_dump_json())
    fix = tmp_path / "fix.diff"
    fix.write_text(task.reference_solution)
    return task_file, fix, store.root


def _verify(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict, str]:
    code = main(["verify", *argv])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out.strip() else {}), err


def test_flag_names_the_store(
    files: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    task, fix, store = files
    code, verdict, _ = _verify(
        capsys, "--task", str(task), "--solution", str(fix), "--snapshot-store", str(store)
    )
    assert (code, verdict["status"]) == (0, "pass")


def test_variable_names_the_store(
    files: tuple[Path, Path, Path],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    task, fix, store = files
    monkeypatch.setenv("TASKSIEVE_SNAPSHOT_STORE", str(store))
    code, verdict, _ = _verify(capsys, "--task", str(task), "--solution", str(fix))
    assert (code, verdict["status"]) == (0, "pass")


def test_a_snapshots_folder_beside_the_input_is_found(
    files: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    task, fix, store = files
    store.rename(task.parent.parent / "snapshots")  # tasks/task.json -> ../snapshots
    code, verdict, _ = _verify(capsys, "--task", str(task), "--solution", str(fix))
    assert (code, verdict["status"]) == (0, "pass")


def test_no_store_is_an_infra_error_saying_how_to_give_one(
    files: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    task, fix, _ = files
    code, verdict, _ = _verify(capsys, "--task", str(task), "--solution", str(fix))
    assert (code, verdict["status"]) == (3, "infra_error")
    assert "--snapshot-store" in verdict["detail"] and "repo/mathlib-sub" in verdict["detail"]


def test_a_store_that_is_not_a_directory_is_a_usage_error(
    files: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    task, fix, _ = files
    code, _, err = _verify(
        capsys,
        "--task",
        str(task),
        "--solution",
        str(fix),
        "--snapshot-store",
        str(tmp_path / "nope"),
    )
    assert code == 2 and "is not a directory" in err and "Traceback" not in err
