"""Decontamination index against the bundled HumanEval."""

from __future__ import annotations

import gzip
import json

import pytest

from tasksieve.transforms.decontam.sets import (
    ContaminationIndex,
    ContaminationItem,
    humaneval_path,
    load_humaneval,
)


@pytest.fixture(scope="module")
def index() -> ContaminationIndex:
    return ContaminationIndex(load_humaneval())


def test_humaneval_has_164_items() -> None:
    assert len(load_humaneval()) == 164


def _prompt(n: int) -> str:
    with gzip.open(humaneval_path(), "rt") as fh:
        return [json.loads(line) for line in fh][n]["prompt"]


def test_verbatim_prompt_is_flagged_as_substring(index: ContaminationIndex) -> None:
    found = index.check("Please solve this:\n" + _prompt(0))
    assert found and found[0].other_id == "HumanEval/0"
    assert found[0].method == "substring"


def test_lightly_edited_prompt_is_flagged(index: ContaminationIndex) -> None:
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
def test_unrelated_prompts_are_clean(index: ContaminationIndex, text: str) -> None:
    assert index.check(text) == []


def test_user_benchmark_item_is_matched() -> None:
    idx = ContaminationIndex(
        [
            ContaminationItem(
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


def test_renamed_and_reworded_prompt_is_flagged(index: ContaminationIndex) -> None:
    text = _prompt(0).replace("has_close_elements", "any_two_near").replace("numbers", "values")
    text = text.replace("given", "provided").replace("Check if", "Decide whether")
    found = index.check(text)
    assert found and found[0].other_id == "HumanEval/0"


def test_every_finding_records_benchmark_item_method_and_score(index: ContaminationIndex) -> None:
    for f in index.check("Please solve this:\n" + _prompt(3)):
        assert f.source == "humaneval" and f.other_id and f.method and 0 < f.score <= 1


def test_short_item_matches_by_whole_sequence_rule() -> None:
    idx = ContaminationIndex(
        [ContaminationItem("b", "s1", "reverse the order of the words in a sentence")]
    )
    found = idx.check("Task: Reverse the order of the words in a sentence, then print it.")
    assert any(f.method == "ngram_short" for f in found)


def test_item_too_short_for_ngrams_is_not_matched_by_them() -> None:
    idx = ContaminationIndex([ContaminationItem("b", "s1", "sort a list")])
    assert not [f for f in idx.check("First sort a list of numbers.") if "ngram" in f.method]


def test_saved_index_round_trips(tmp_path, index: ContaminationIndex) -> None:
    from tasksieve.transforms.decontam.sets import is_index_file, load_index_items

    path = tmp_path / "humaneval.parquet"
    index.save(str(path))
    assert is_index_file(str(path))
    items, pre = load_index_items(str(path), index.settings)
    assert len(items) == 164 and pre is not None
    again = ContaminationIndex(items, index.settings, precomputed=pre)
    assert again.check(_prompt(5))[0].other_id == "HumanEval/5"
