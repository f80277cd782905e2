"""The short-item decontamination benchmark runs on a few items and reports both parts."""

from __future__ import annotations

import random

import pytest

from benchmarks import decontam_eval
from benchmarks.rewordings import humaneval_rows
from benchmarks.short_rewordings import KINDS, changed_examples, parse, positives, shortest_quarter


def test_small_run_reports_full_set_and_shortest_quarter(capsys: pytest.CaptureFixture) -> None:
    assert decontam_eval.main(["--limit", "2"]) == 0
    out = capsys.readouterr().out
    for line in ("default  full set", "default  shortest quarter", "before   full set"):
        assert line in out
    assert "load average before" in out and "load average after" in out


def test_the_set_is_deterministic_per_seed() -> None:
    a, b, c = positives(3, ("reformat",)), positives(3, ("reformat",)), positives(4, ("reformat",))
    assert a == b and a != c


def test_the_shortest_quarter_is_repeated() -> None:
    rows = humaneval_rows()
    short = shortest_quarter(rows)
    pos = positives(1, KINDS)
    assert len(short) == 41
    assert sum(p.short for p in pos) == 3 * len(KINDS) * 41
    assert len(pos) - sum(p.short for p in pos) == len(KINDS) * (164 - 41)


def test_changed_examples_are_recomputed_by_the_reference() -> None:
    row = next(r for r in humaneval_rows() if r["task_id"] == "HumanEval/53")
    p = parse(row["prompt"], row["entry_point"])
    assert p is not None
    moved = changed_examples(p, row, random.Random(0))
    assert moved.examples != p.examples
    for args, out in moved.examples:
        x, y = (int(v) for v in args.split(","))
        assert int(out) == x + y
