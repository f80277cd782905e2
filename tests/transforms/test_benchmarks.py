"""Decontamination index against the bundled HumanEval."""

from __future__ import annotations

import gzip
import json

import pytest

from transforms.benchmarks import BenchmarkIndex, BenchmarkItem, humaneval_path, load_humaneval


@pytest.fixture(scope="module")
def index() -> BenchmarkIndex:
    return BenchmarkIndex(load_humaneval())


def test_humaneval_has_164_items() -> None:
    assert len(load_humaneval()) == 164


def _prompt(n: int) -> str:
    with gzip.open(humaneval_path(), "rt") as fh:
        return [json.loads(line) for line in fh][n]["prompt"]


def test_verbatim_prompt_is_flagged_as_substring(index: BenchmarkIndex) -> None:
    found = index.check("Please solve this:\n" + _prompt(0))
    assert found and found[0].other_id == "HumanEval/0"
    assert found[0].method == "substring"


def test_lightly_edited_prompt_is_flagged(index: BenchmarkIndex) -> None:
    text = _prompt(12).replace("Return", "Give back").replace("list", "sequence", 1)
    found = index.check(text)
    assert any(f.other_id == "HumanEval/12" for f in found)


@pytest.mark.parametrize(
    "text",
    [
        "Write a SQL query that returns the total revenue per region from the sales table.",
        "Write a Kubernetes Deployment for nginx with memory limits and runAsNonRoot.",
        "Implement run_length_encode(s) returning a list of (char, count) tuples.",
    ],
)
def test_unrelated_prompts_are_clean(index: BenchmarkIndex, text: str) -> None:
    assert index.check(text) == []


def test_user_benchmark_item_is_matched() -> None:
    idx = BenchmarkIndex(
        [
            BenchmarkItem(
                "mybench",
                "q1",
                "Compute the nth Fibonacci number "
                "using memoisation and return it modulo one billion seven.",
            )
        ]
    )
    found = idx.check(
        "compute the NTH fibonacci number using memoisation and return it modulo one billion seven!"
    )
    assert found[0].source == "mybench"
