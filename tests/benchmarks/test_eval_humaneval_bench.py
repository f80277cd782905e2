"""The HumanEval eval benchmark fails loudly when the two harnesses disagree."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks.eval_humaneval import check_equal, completion
from tasksieve.pipeline.eval.humaneval import problems
from tasksieve.pipeline.eval.passk import pass_at_k


def _rows(correct: dict[str, int], n: int) -> dict[str, dict[str, Any]]:
    return {
        t: {"c": c, "pass_at_1": pass_at_k(n, c, 1), "pass_at_10": pass_at_k(n, c, 10)}
        for t, c in correct.items()
    }


def test_agreement_passes_and_any_difference_fails() -> None:
    correct = {"HumanEval/0": 3, "HumanEval/1": 10}
    scores = {"pass@1": 0.65, "pass@10": 1.0}
    check_equal(1, scores, correct, scores, _rows(correct, 10), 10)
    with pytest.raises(SystemExit, match="correct counts differ"):
        check_equal(1, scores, correct, scores, _rows({**correct, "HumanEval/0": 4}, 10), 10)
    with pytest.raises(SystemExit, match="pass@1 differs"):
        check_equal(1, scores, correct, {**scores, "pass@1": 0.6}, _rows(correct, 10), 10)


def test_workload_mixes_right_and_spoiled_samples() -> None:
    p = problems()[1]
    kinds = [completion(p, 1, j, 10) for j in range(10)]
    assert kinds[:7] == [p["canonical_solution"]] * 7  # (7 * 1) mod 11 canonical samples
    assert all(k != p["canonical_solution"] for k in kinds[7:])
