"""Shingling, Jaccard and the near-duplicate clustering."""

from __future__ import annotations

from transforms.textsim import DocShingles, jaccard, near_duplicates, normalize_text, shingles

BASE = (
    "Write a function merge_intervals(intervals) that takes a list of [start, end] pairs and "
    "returns the list of merged overlapping intervals sorted by start."
)


def test_normalize_folds_case_punctuation_and_space() -> None:
    assert normalize_text("Hello,   WORLD!\n") == "hello world"


def test_short_text_is_one_shingle() -> None:
    assert shingles("two words", 3) == frozenset({"two words"})


def test_jaccard_identity_and_disjoint() -> None:
    a = shingles(BASE)
    assert jaccard(a, a) == 1.0
    assert jaccard(a, shingles("something else entirely different here")) == 0.0


def _doc(i: str, order: int, text: str) -> DocShingles:
    return DocShingles(i, ("f", order, i), shingles(text))


def test_near_duplicates_keep_earliest_and_name_it() -> None:
    docs = [
        _doc("b", 2, BASE + " Thanks!"),
        _doc("a", 1, BASE),
        _doc("c", 3, "Compute the edit distance between two strings using dynamic programming."),
    ]
    dropped = near_duplicates(docs, threshold=0.8)
    assert set(dropped) == {"b"}
    assert dropped["b"][0] == "a"
    assert dropped["b"][1] >= 0.8


def test_near_duplicates_leave_distinct_texts() -> None:
    docs = [_doc("a", 1, BASE), _doc("b", 2, "Reverse the words of a sentence, keep punctuation.")]
    assert near_duplicates(docs, threshold=0.8) == {}
