"""The progress-overhead benchmark runs in quick mode and batches its channel writes."""

from __future__ import annotations

import re

import pytest

from benchmarks import progress_overhead


def test_quick_run_writes_every_count_in_few_lines(capsys: pytest.CaptureFixture[str]) -> None:
    assert progress_overhead.main(["--tasks", "300", "--rounds", "1"]) == 0
    out = capsys.readouterr().out
    found = re.search(r"channel writes per run: (\d+) lines carrying (\d+) counts", out)
    assert found is not None, out
    lines, counts = int(found[1]), int(found[2])
    # one count per task, one more per rejected one (pass rate 0 or 1: 2 tasks in 5)
    assert counts == 300 + 300 * 2 // 5
    assert lines < counts // 10
    assert "channel / none: " in out
