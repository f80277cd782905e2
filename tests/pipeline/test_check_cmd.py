"""``tasksieve check``: exit codes, the failure table and ``--format json``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tasksieve.pipeline.cli import main
from tests.pipeline.gx_helpers import copy_run, rewrite, set_values, shared_run
from tests.pipeline.test_cli_startup import loaded

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return shared_run(tmp_path_factory)


@pytest.fixture(scope="module")
def broken(run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy with one unknown reason code and one pass rate out of range."""
    out = copy_run(run, tmp_path_factory.mktemp("broken"))
    rewrite(out, "rejected", set_values("reason", lambda old: ["made.up", *old[1:]]))
    return out


def test_clean_output_exits_0(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(run)]) == 0
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "all passed" in captured.err


def test_relative_output_path_is_checked(
    run: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``tasksieve check out`` from the output's parent, as a user types it after make demo."""
    monkeypatch.chdir(run.parent)
    assert main(["check", run.name]) == 0
    assert "all passed" in capsys.readouterr().err
    assert (run / "gx" / "index.html").is_file()


def test_failed_expectation_exits_1_and_is_listed(
    broken: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["check", str(broken)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:4] == ["suite", "expectation", "column", "rows"]
    (row,) = lines[1:]
    assert row.split()[:4] == ["rejected", "expect_column_values_to_match_regex", "reason", "1"]


def test_format_json_prints_checks_json(broken: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(broken), "--format", "json"]) == 1
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads((broken / "checks.json").read_text())
    assert printed["success"] is False


@pytest.mark.parametrize("what", ["missing dir", "empty dir", "a file"])
def test_not_an_output_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], what: str):
    target = tmp_path / "target"
    if what == "empty dir":
        target.mkdir()
    if what == "a file":
        target.write_text("x")
    assert main(["check", str(target)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("tasksieve check: error:") and str(target) in captured.err


def test_check_prints_no_progress_bars(run: Path, capfd: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(run)]) == 0
    captured = capfd.readouterr()
    assert "Calculating Metrics" not in captured.err + captured.out
    assert len(captured.err.strip().splitlines()) == 1


def test_check_loads_no_beam(run: Path, tmp_path: Path) -> None:
    rc, modules = loaded(tmp_path, "check", str(run))
    assert rc == 0 and "great_expectations" in modules  # it really checked
    assert not [m for m in modules if m == "apache_beam" or m.startswith("apache_beam.")]


def test_unreadable_shard_exits_2_naming_it(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = copy_run(run, tmp_path)
    (shard,) = (out / "rollouts").glob("*.parquet")
    shard.write_bytes(b"not parquet")
    assert main(["check", str(out)]) == 2
    assert f"{shard}: not a readable Parquet shard" in capsys.readouterr().err
