"""``tasksieve sandbox build-image`` without a Docker engine: one line naming the command."""

from __future__ import annotations

from pathlib import Path

import pytest

from tasksieve.pipeline.cli import main


def test_build_image_without_an_engine_is_one_error_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    pytest.importorskip("docker")
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    assert main(["sandbox", "build-image"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tasksieve sandbox build-image: error: no Docker engine reachable"), err
    assert err.count("\n") == 1 and "Traceback" not in err
