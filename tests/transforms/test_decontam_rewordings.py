"""Decontamination of reworded short benchmark items, and real near-twins that must stay clean."""

from __future__ import annotations

import random

import numpy as np
import pytest

from benchmarks.rewordings import humaneval_rows, load_problems, reword
from tasksieve.transforms.algorithms.containment import ContainmentIndex
from tasksieve.transforms.algorithms.textsim import jaccard_hashes, shingle_hashes
from tasksieve.transforms.decontam.sets import (
    ContaminationIndex,
    ContaminationItem,
    IndexSettings,
    load_humaneval,
)

ROWS = {r["task_id"]: r for r in humaneval_rows()}
# short and long items, doctest and prose-example styles, two near-identical HumanEval twins
ITEMS = [0, 1, 12, 13, 23, 53, 56, 61, 120, 150]
SHORT_ITEMS = [0, 12, 23, 53, 56, 61]


@pytest.fixture(scope="module")
def index() -> ContaminationIndex:
    return ContaminationIndex(load_humaneval())


def _flags(index: ContaminationIndex, text: str, item: str) -> bool:
    return any(f.other_id == item for f in index.check(text))


class TestRewordedItemsAreFlagged:
    @pytest.mark.parametrize("kind", ["rename", "paraphrase", "rename_paraphrase", "wrapped"])
    @pytest.mark.parametrize("n", ITEMS)
    def test_rewording_is_flagged_as_its_item(
        self, index: ContaminationIndex, n: int, kind: str
    ) -> None:
        row = ROWS[f"HumanEval/{n}"]
        assert _flags(index, reword(row, kind, random.Random(n)), row["task_id"])

    @pytest.mark.parametrize("n", SHORT_ITEMS)
    def test_prose_replaced_examples_kept_is_flagged(
        self, index: ContaminationIndex, n: int
    ) -> None:
        row = ROWS[f"HumanEval/{n}"]
        assert _flags(index, reword(row, "examples_only", random.Random(n)), row["task_id"])

    @pytest.mark.parametrize("n", SHORT_ITEMS)
    def test_wrapped_item_has_low_jaccard_and_is_still_flagged(
        self, index: ContaminationIndex, n: int
    ) -> None:
        """The case Jaccard-tuned LSH misses: the item is a small part of a long task."""
        row = ROWS[f"HumanEval/{n}"]
        text = reword(row, "wrapped", random.Random(n))
        a, b = shingle_hashes([row["prompt"], text], index.settings.shingle)
        assert jaccard_hashes(a, b) < index.settings.threshold
        found = [f for f in index.check(text) if f.other_id == row["task_id"]]
        assert found and found[0].method in {"containment", "ngram13"}


PROBLEMS = load_problems()
TWINS = [p for p in PROBLEMS if p.twin_of]


class TestRealProblemsAreClean:
    def test_the_negative_set_is_large_and_has_twins(self) -> None:
        assert len(PROBLEMS) >= 60 and len(TWINS) >= 20
        assert all(p.twin_of in ROWS for p in TWINS)

    @pytest.mark.parametrize("problem", TWINS, ids=lambda p: p.ident)
    def test_near_twin_of_an_item_is_not_flagged(
        self, index: ContaminationIndex, problem: object
    ) -> None:
        assert index.check(problem.text) == []  # type: ignore[attr-defined]

    @pytest.mark.parametrize(
        "problem", [p for p in PROBLEMS if not p.twin_of], ids=lambda p: p.ident
    )
    def test_other_problem_is_not_flagged(self, index: ContaminationIndex, problem: object) -> None:
        assert index.check(problem.text) == []  # type: ignore[attr-defined]


class TestContainmentIndex:
    def test_intersections_are_exact(self) -> None:
        rng = np.random.default_rng(3)
        pool = rng.integers(0, 2**63, 400, dtype=np.uint64)
        sets = [rng.choice(pool, int(rng.integers(1, 60)), replace=False) for _ in range(40)]
        idx = ContainmentIndex(sets, max_df=len(sets))
        query = rng.choice(pool, 120, replace=False)
        got = idx.query(query)
        expect = {i: len(set(s.tolist()) & set(query.tolist())) for i, s in enumerate(sets)}
        assert dict(zip(got.items.tolist(), got.shared.tolist(), strict=True)) == {
            i: c for i, c in expect.items() if c
        }
        for i, c in zip(got.items.tolist(), got.containment.tolist(), strict=True):
            assert c == expect[i] / len(set(sets[i].tolist()))

    def test_shingles_in_more_than_max_df_items_are_dropped(self) -> None:
        common = np.array([7], dtype=np.uint64)
        sets = [np.array([7, 10 + i], dtype=np.uint64) for i in range(4)]
        idx = ContainmentIndex(sets, max_df=3)
        assert idx.sizes.tolist() == [1, 1, 1, 1]
        assert idx.query(common).items.size == 0

    def test_empty_query_and_empty_items(self) -> None:
        idx = ContainmentIndex([np.zeros(0, np.uint64), np.array([1], np.uint64)], max_df=2)
        assert idx.query(np.zeros(0, np.uint64)).items.size == 0
        assert idx.query(np.array([1], np.uint64)).items.tolist() == [1]


LONG = (
    "Given a list of lowercase words, return the word whose letters, read in alphabetical "
    "order, form the longest strictly increasing run; break ties by the earliest position"
)
BOILER = "You are an expert Python programmer and here is your task, solve it carefully now"


class TestNgramRule:
    def test_one_informative_ngram_flags(self) -> None:
        idx = ContaminationIndex([ContaminationItem("b", "q1", LONG)])
        found = idx.check("Background first. " + " ".join(LONG.split()[:14]) + " and more.")
        assert [f.method for f in found if f.method.startswith("ngram")] == ["ngram13"]

    def test_ngram_shared_by_many_items_does_not_flag(self) -> None:
        items = [
            ContaminationItem("b", f"q{i}", f"{BOILER}: problem {i} {LONG[:i]}") for i in range(60)
        ]
        idx = ContaminationIndex(items)
        assert not [f for f in idx.check(BOILER + ". Sort a list.") if f.method == "ngram13"]

    def test_run_of_numbers_is_not_an_informative_ngram(self) -> None:
        digits = " ".join(str(i) for i in range(20))
        idx = ContaminationIndex([ContaminationItem("b", "q1", f"Example input {digits} ok")])
        assert not [f for f in idx.check(f"My data is {digits}.") if f.method == "ngram13"]

    def test_tiny_overlap_below_min_shared_does_not_flag(self) -> None:
        settings = IndexSettings()
        idx = ContaminationIndex([ContaminationItem("b", "q1", "def f(x):\n    return x")])
        found = idx.check("def f(x):\n    return x + 1  # a tiny unrelated helper")
        assert idx._contain.sizes[0] < settings.min_shared
        assert not [f for f in found if f.method == "containment"]
