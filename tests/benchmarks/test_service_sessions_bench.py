"""The session-latency benchmark runs in a tiny configuration and checks every answer."""

from __future__ import annotations

import shutil

import pytest

from benchmarks import service_sessions


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
def test_service_sessions_quick_run(capsys: pytest.CaptureFixture) -> None:
    assert service_sessions.main(["--execs", "5", "--rounds", "1", "--files", "3"]) == 0
    out = capsys.readouterr().out
    assert "packed p50 / live p50:" in out and "packed p50 / live, no list p50:" in out
