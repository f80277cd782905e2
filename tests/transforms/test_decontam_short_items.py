"""Decontamination of the shortest benchmark items: reformatted copies caught, same-topic
problems left alone, near-twin items told apart, and the rules behind it."""

from __future__ import annotations

import random

import numpy as np
import pytest

from benchmarks.rewordings import humaneval_rows
from benchmarks.short_rewordings import reword_short
from tasksieve.schemas import Finding
from tasksieve.transforms.decontam.evidence import best_item_first, entry_names, sentence_table
from tasksieve.transforms.decontam.sets import ContaminationIndex, IndexSettings, load_humaneval

ROWS = {r["task_id"]: r for r in humaneval_rows()}
# the shortest items of HumanEval by prompt plus canonical solution
SHORTEST = [53, 23, 45, 34, 27, 55, 28, 42, 24, 35]


@pytest.fixture(scope="module")
def index() -> ContaminationIndex:
    return ContaminationIndex(load_humaneval())


def _top(index: ContaminationIndex, text: str) -> str:
    found = index.check(text)
    return found[0].other_id if found else ""


@pytest.mark.parametrize("kind", ["reformat", "rename_reformat"])
@pytest.mark.parametrize("n", SHORTEST)
def test_short_item_after_reformatting_is_caught(
    index: ContaminationIndex, n: int, kind: str
) -> None:
    row = ROWS[f"HumanEval/{n}"]
    assert _top(index, reword_short(row, kind, random.Random(n))) == row["task_id"]


@pytest.mark.parametrize(
    ("text", "item"),
    [
        (
            'def length(s):\n    """Return length of given string\n\n'
            '    assert length("") == 0\n    assert length("abc") == 3\n    """\n',
            "HumanEval/23",
        ),
        (
            "Write a function `plus(a, b)` that adds two numbers a and b.\n\nExamples:\n"
            "- `plus(2, 3)` -> `5`\n- `plus(5, 7)` -> `12`\n",
            "HumanEval/53",
        ),
        (
            "def area(a, h):\n  # Given length of a side and high return area for a triangle."
            "\n  # area(5, 3) should return 7.5\n  pass\n",
            "HumanEval/45",
        ),
    ],
    ids=["doctest-as-asserts", "task-statement", "docstring-as-comments"],
)
def test_short_item_in_another_layout_is_caught(
    index: ContaminationIndex, text: str, item: str
) -> None:
    assert _top(index, text) == item


def test_short_item_with_new_examples_is_caught_by_its_name(index: ContaminationIndex) -> None:
    text = (
        'def get_positive(values):\n    """Keep only positive numbers in the list.\n'
        '    >>> get_positive([4, -1, 0, 8])\n    [4, 8]\n    """\n'
    )
    found = index.check(text)
    assert found[0].other_id == "HumanEval/30" and found[0].method == "name"


def test_short_item_renamed_with_new_examples_is_caught_by_its_sentence(
    index: ContaminationIndex,
) -> None:
    text = 'def keep(v):\n    """Return sorted unique elements in a list\n    >>> keep([3, 1, 3])\n'
    found = index.check(text + '    [1, 3]\n    """\n')
    assert found[0].other_id == "HumanEval/34" and found[0].method == "sentence"


def test_sentence_two_items_share_names_neither() -> None:
    texts = [
        f'def f{i}(x):\n    """Return the sum of all the given numbers.\n    """' for i in (1, 2)
    ]
    table = sentence_table([*texts, '"""Return the product of all the given numbers."""'], 6)
    assert [item for entries in table.values() for item, _ in entries] == [2]


@pytest.mark.parametrize(
    "text",
    [
        'def word_lengths(text: str) -> list:\n    """Return the length of every word in the '
        'given string, in order.\n    >>> word_lengths("ab c")\n    [2, 1]\n    """\n',
        'def rectangle_area(w, h):\n    """Given the width and height of a rectangle return its'
        ' area.\n    >>> rectangle_area(5, 3)\n    15\n    """\n',
        'def add_lists(a: list, b: list):\n    """Add two lists element by element; they have '
        'the same length.\n    >>> add_lists([1, 2], [3, 4])\n    [4, 6]\n    """\n',
        'def fib_mod(n: int, m: int):\n    """Return the n-th Fibonacci number modulo m.\n'
        '    >>> fib_mod(10, 7)\n    6\n    """\n',
        "Write a function `count_digits(n)` that returns how many decimal digits the positive "
        "integer n has.\n\nFor instance, count_digits(1234) should return 4.",
        'def both(a: list, b: list):\n    """Return sorted unique elements that are in exactly '
        'one of the lists.\n    >>> both([1, 2], [2, 3])\n    [1, 3]\n    """\n',
    ],
    ids=["strlen", "triangle", "add", "fib", "digits-statement", "unique-sentence-extended"],
)
def test_same_topic_different_problem_is_not_flagged(index: ContaminationIndex, text: str) -> None:
    assert index.check(text) == []


@pytest.mark.parametrize(("item", "twin"), [(46, 63), (63, 46)])
@pytest.mark.parametrize("kind", ["reformat", "rename_reformat", "paraphrase_reformat"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_near_twin_items_resolve_to_the_reworded_one(
    index: ContaminationIndex, item: int, twin: int, kind: str, seed: int
) -> None:
    text = reword_short(ROWS[f"HumanEval/{item}"], kind, random.Random(seed))
    found = index.check(text)
    assert {f.other_id for f in found} >= {f"HumanEval/{item}"}
    assert found[0].other_id == f"HumanEval/{item}"


def test_best_item_first_orders_by_weight_then_score() -> None:
    def f(item: str, method: str, score: float) -> Finding:
        return Finding(kind="contamination", other_id=item, source="b", method=method, score=score)

    found = [f("sib", "containment", 0.9), f("own", "layout", 0.7), f("own", "containment", 0.8)]
    ordered = best_item_first(found, {"sib": 1.2, "own": 1.5})
    assert [(x.other_id, x.score) for x in ordered] == [("own", 0.8), ("own", 0.7), ("sib", 0.9)]


@pytest.mark.parametrize(
    ("size", "need"),
    [(200, 10), (34, 10), (20, 6), (14, 5), (8, 4), (7, 10), (3, 10)],
    ids=["long", "at-cap", "short", "shorter", "twice-floor", "tiny", "trivial"],
)
def test_shared_minimum_is_relative_for_short_items(size: int, need: int) -> None:
    got = IndexSettings().needed(np.array([size]))
    assert got.tolist() == [need]


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("min_shared_fraction", 0.0, "min_shared_fraction"),
        ("min_shared_fraction", 1.5, "min_shared_fraction"),
        ("min_shared_floor", 0, "min_shared_floor"),
        ("min_shared_floor", 11, "min_shared_floor"),
        ("layout_size", -1, "layout_size"),
        ("name_threshold", 2.0, "name_threshold"),
        ("min_sentence_words", 2, "min_sentence_words"),
        ("min_sentence_words", 65, "min_sentence_words"),
    ],
)
def test_bad_short_item_settings_fail_with_the_field(field: str, value: float, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        IndexSettings(**{field: value})  # type: ignore[arg-type]


def test_layout_channel_off_leaves_one_channel() -> None:
    index = ContaminationIndex(load_humaneval(), IndexSettings(layout_size=0))
    text = reword_short(ROWS["HumanEval/53"], "reformat", random.Random(1))
    assert not [f for f in index.check(text) if f.method in {"layout", "name"}]


@pytest.mark.parametrize(
    ("texts", "names"),
    [
        (["def a_b(x):", "def c_d(x):"], [{"a_b"}, {"c_d"}]),
        (["def add(x):", "def c_d(x):"], [set(), {"c_d"}]),
        (["def same_name(x):", "def same_name(y):"], [set(), set()]),
        (["def helper_x(s):\ndef main_y(s):", "no def at all"], [{"helper_x", "main_y"}, set()]),
    ],
    ids=["distinct", "one-word", "shared", "helper-and-none"],
)
def test_entry_names_keep_only_distinctive_ones(texts: list[str], names: list[set[str]]) -> None:
    assert entry_names(texts) == [frozenset(n) for n in names]
