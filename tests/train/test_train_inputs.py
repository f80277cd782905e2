"""Bad inputs to `tasksieve train`: one line on stderr and exit 2, before any model loads."""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import pytest

from tasksieve.pipeline.cli import main
from tasksieve.pipeline.train.exits import EXIT_USAGE
from tasksieve.pipeline.train.run import LINEAGE_FILE


def _train(capsys: pytest.CaptureFixture[str], tasks: Path, out: Path, *extra: str) -> str:
    rc = main(["train", "--tasks", str(tasks), "--output", str(out), "--quiet", *extra])
    err = capsys.readouterr().err
    assert rc == EXIT_USAGE
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def _copy(curated: Path, tmp_path: Path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(curated, run)
    return run


def test_missing_tasks_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    line = _train(capsys, tmp_path / "nope", tmp_path / "ckpt")
    assert "no such directory" in line


def test_dir_without_manifest(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "tasks").mkdir()
    line = _train(capsys, tmp_path, tmp_path / "ckpt")
    assert "no manifest.json" in line


@pytest.mark.parametrize("version", ["0.9", "2.0", None, 1.0])
def test_wrong_schema_version(
    curated: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], version: object
) -> None:
    run = _copy(curated, tmp_path)
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["schema_version"] = version
    (run / "manifest.json").write_text(json.dumps(manifest))
    line = _train(capsys, run, tmp_path / "ckpt")
    assert "schema_version" in line and repr(version) in line


def test_manifest_not_json(
    curated: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _copy(curated, tmp_path)
    (run / "manifest.json").write_text("{not json")
    assert "not JSON" in _train(capsys, run, tmp_path / "ckpt")


@pytest.mark.parametrize("family", ["python", "CODE", ""])
def test_unknown_family(
    curated: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], family: str
) -> None:
    line = _train(capsys, curated, tmp_path / "ckpt", "--families", "code", family)
    assert f"unknown family {family!r}" in line


def test_family_with_no_kept_tasks(
    curated: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = _train(capsys, curated, tmp_path / "ckpt", "--families", "api")
    assert "no kept tasks of families api" in line


def test_no_shards(curated: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _copy(curated, tmp_path)
    shutil.rmtree(run / "tasks")
    assert "no Parquet shards" in _train(capsys, run, tmp_path / "ckpt")


def test_non_empty_output_needs_overwrite(
    curated: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "ckpt"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    assert "--overwrite" in _train(capsys, curated, out)


def test_overwrite_refuses_a_directory_that_is_no_checkpoint(
    curated: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "ckpt"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    line = _train(capsys, curated, out, "--overwrite")
    assert LINEAGE_FILE in line
    assert (out / "keep.txt").read_text() == "mine"


def test_model_dir_without_config(
    curated: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = _train(capsys, curated, tmp_path / "ckpt", "--model", str(tmp_path))
    assert "no config.json" in line


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (["--num-generations", "1"], "at least 2"),
        (["--vllm-server-base-url", "http://h:8000"], "--vllm-mode server"),
        (["--learning-rate", "0"], "learning-rate"),
        (["--infra-retries", "-1"], "retries"),
        (["--end-at-fence", "--use-vllm"], "--end-at-fence works with transformers"),
    ],
)
def test_bad_settings(
    curated: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    flags: list[str],
    needle: str,
) -> None:
    pytest.importorskip("trl")
    assert needle in _train(capsys, curated, tmp_path / "ckpt", *flags)


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (["--sandbox", "remote"], "--sandbox-url"),
        (["--sandbox-url", "http://127.0.0.1:9"], "--sandbox remote"),
        (["--sandbox", "remote", "--sandbox-url", "127.0.0.1:9"], "http://"),
    ],
)
def test_bad_remote_sandbox_settings(
    curated: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    flags: list[str],
    needle: str,
) -> None:
    assert needle in _train(capsys, curated, tmp_path / "ckpt", *flags)


def test_remote_sandbox_is_asked_at_training_priority(curated: Path, tmp_path: Path) -> None:
    from tasksieve.pipeline.train.cli import add_parser
    from tasksieve.pipeline.train.run import plan

    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers(dest="cmd"))
    argv = ["train", "--tasks", str(curated), "--output", str(tmp_path / "ckpt")]
    argv += ["--sandbox", "remote", "--sandbox-url", "http://127.0.0.1:9, http://127.0.0.1:10"]
    sandbox = plan(parser.parse_args(argv)).sandbox
    assert sandbox.backend == "remote"
    assert sandbox.urls == ("http://127.0.0.1:9", "http://127.0.0.1:10")
    assert sandbox.priority == "training"
