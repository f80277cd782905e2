"""The HumanEval test-strength benchmark runs end to end on a couple of problems."""

from __future__ import annotations

import shutil

import pytest

from benchmarks import test_strength as bench

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")


@needs_bwrap
def test_quick_run_prints_the_score_table(capsys: pytest.CaptureFixture) -> None:
    assert bench.main(["--limit", "2", "--max-mutants", "3", "--probes", "4"]) == 0
    out = capsys.readouterr().out
    assert "problems: 2; mutants made" in out
    assert "| --min-mutation-score | problems rejected | share |" in out
    assert "time per task:" in out


def test_summary_lists_problems_with_survivors_worst_first() -> None:
    def row(task_id: str, score: float | None, survived: int) -> bench.Row:
        return bench.Row(task_id, 4, 4 - survived, survived, 0, 0, 0, score, 1.0, False, 0, 3,
                         f"py.x at line 1 survives on {task_id}\n-diff")  # fmt: skip

    text = bench.summary([row("A", 0.5, 2), row("B", 1.0, 0), row("C", 0.75, 1)], 3.0)
    listed = [ln for ln in text.splitlines() if ln.startswith("- ")]
    assert [ln.split()[1] for ln in listed] == ["A", "C"]
    assert "| 0.8 | 2 | 66.7% |" in text
