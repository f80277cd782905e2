"""Normalisation, shingling (word, code, char), identifier canonicalisation and hashing."""

from __future__ import annotations

import numpy as np
import pytest

from tasksieve.transforms.algorithms.textsim import (
    ID_TOKEN,
    ShingleConfig,
    identifier_names,
    jaccard,
    jaccard_hashes,
    normalize_text,
    shingle_hashes,
    shingle_hashes_flat,
    shingles,
    split_flat,
    strip_annotations,
    strip_code,
    tokens,
)

BASE = (
    "Write a function merge_intervals(intervals) that takes a list of [start, end] pairs and "
    "returns the list of merged overlapping intervals sorted by start."
)
CODE = '''def count_vowels(text: str) -> int:
    """Count the vowels in text."""
    total = 0  # running count
    for ch in text:
        if ch in "aeiou":
            total += 1
    return total
'''
RENAMED = CODE.replace("count_vowels", "num_vowels").replace("total", "acc").replace("ch", "c")


def test_normalize_folds_case_punctuation_and_space() -> None:
    assert normalize_text("Hello,   WORLD!\n") == "hello world"


def test_short_text_is_one_shingle() -> None:
    assert shingles("two words", 3) == frozenset({"two words"})


def test_jaccard_identity_and_disjoint() -> None:
    a = shingles(BASE)
    assert jaccard(a, a) == 1.0
    assert jaccard(a, shingles("something else entirely different here")) == 0.0


def test_strip_code_drops_comments_and_docstrings() -> None:
    out = strip_code(CODE)
    assert "running count" not in out and "Count the vowels" not in out
    assert "total += 1" in out


def test_identifier_names_finds_defined_called_and_params() -> None:
    names = identifier_names(CODE)
    assert {"count_vowels", "text"} <= names
    assert "str" not in names and "return" not in names


def test_canonical_identifiers_make_renames_match() -> None:
    plain = ShingleConfig(kind="code", size=3)
    canon = ShingleConfig(kind="code", size=3, canonical_identifiers=True, strip_comments=True)
    before = jaccard(shingles(CODE, plain), shingles(RENAMED, plain))
    after = jaccard(shingles(CODE, canon), shingles(RENAMED, canon))
    assert before < 0.5 < 0.9 <= after


@pytest.mark.parametrize("kind,size", [("word", 3), ("word", 1), ("code", 4), ("char", 5)])
@pytest.mark.parametrize(
    "text", [BASE, CODE, "", "   ", "one", "naïve café ünïcode — dash", "\x00\ud800 odd"]
)
def test_hashes_count_the_same_shingles_as_strings(kind: str, size: int, text: str) -> None:
    cfg = ShingleConfig(kind=kind, size=size)
    (hashed,) = shingle_hashes([text], cfg)
    assert hashed.size == len(shingles(text, cfg))


def test_hash_jaccard_equals_string_jaccard() -> None:
    other = BASE.replace("sorted", "ordered").replace("merged", "combined")
    a, b = shingle_hashes([BASE, other])
    assert jaccard_hashes(a, b) == pytest.approx(jaccard(shingles(BASE), shingles(other)))


def test_batch_hashing_does_not_mix_documents() -> None:
    alone = shingle_hashes(["alpha beta gamma delta"])[0]
    batched = shingle_hashes(["x y", "alpha beta gamma delta", "gamma delta epsilon"])[1]
    assert np.array_equal(alone, batched)


@pytest.mark.parametrize("bad", [{"kind": "bytes"}, {"size": 0}])
def test_bad_shingle_config_fails(bad: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        ShingleConfig(**bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "cfg",
    [
        ShingleConfig(),
        ShingleConfig(size=1),
        ShingleConfig(lowercase=False),
        ShingleConfig(strip_comments=True, strip_docstrings=True),
        ShingleConfig(kind="code", size=4),
        ShingleConfig(kind="char", size=5),
    ],
)
def test_flat_batch_matches_one_text_at_a_time(cfg: ShingleConfig) -> None:
    texts = [BASE, "", "two words", CODE, "   ", RENAMED, "Hello hello HELLO world"]
    flat, counts = shingle_hashes_flat(texts, cfg)
    assert counts.sum() == flat.size and counts.size == len(texts)
    for text, part in zip(texts, split_flat(flat, counts), strict=True):
        (alone,) = shingle_hashes([text], cfg)
        assert np.array_equal(np.unique(part), alone)
        assert alone.size == len(shingles(text, cfg))


def test_case_folding_follows_the_config() -> None:
    lower = shingle_hashes(["Hello World Again", "hello world again"])
    cased = shingle_hashes(
        ["Hello World Again", "hello world again"], ShingleConfig(lowercase=False)
    )
    assert np.array_equal(lower[0], lower[1]) and not np.array_equal(cased[0], cased[1])


def test_long_tokens_hash_on_every_byte() -> None:
    base = "x" * 20
    words = [base, base[:-1] + "y", "y" + base[1:], base[:8] + "y" + base[9:], base + "x"]
    words += ["z" * 600, "z" * 599 + "q", "q" + "z" * 599, "z" * 8, "z" * 9]
    text = " ".join(words)
    (hashed,) = shingle_hashes([text], ShingleConfig(size=1))
    assert hashed.size == len(set(words))
    again = shingle_hashes([f"{words[3]} and {words[6]}"], ShingleConfig(size=1))[0]
    assert np.isin(again, hashed).sum() == 2


def test_short_documents_are_one_shingle_in_a_batch() -> None:
    texts = ["a", "a b", "a b c", "", "b a", "a b"]
    flat, counts = shingle_hashes_flat(texts, ShingleConfig(size=3))
    assert counts.tolist() == [1, 1, 1, 0, 1, 1]
    parts = split_flat(flat, counts)
    assert parts[1][0] == parts[5][0] and len({int(p[0]) for p in parts if p.size}) == 4


LAYOUT = ShingleConfig(kind="code", size=3, canonical_identifiers=True, drop_layout=True)


@pytest.mark.parametrize(
    "text",
    [
        'def f(x: int) -> int:\n    """Double x.\n    >>> f(2)\n    4\n    """',
        "def f(x):\n    '''Double x.\n    assert f(2) == 4\n    '''",
        "def f(x):\n  # Double x.\n  # f(2) -> 4",
        'def f(x):\n    """Double x. For example, f(2) should return 4."""',
    ],
    ids=["doctest-annotated", "assert", "comment-arrow", "should-return"],
)
def test_layout_free_tokens_are_the_same_for_every_example_style(text: str) -> None:
    want = [ID_TOKEN, "(", ID_TOKEN, ")", "double", ID_TOKEN, ID_TOKEN, "(", "2", ")", "4"]
    assert tokens(text, LAYOUT) == want


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("def f(a: Dict[str, int], b: int = 3) -> List[int]:", "def f(a, b= 3):"),
        ("def g(x: Callable[[int, str], None]):", "def g(x):"),
        ("def h(*args: int, **kw: Any) -> None:\n    pass", "def h(*args, **kw):\n    pass"),
        ("def k(x):  # no annotation", "def k(x):  # no annotation"),
        ("def broken(x: int", "def broken(x"),
        ("text with no def: a: b -> c", "text with no def: a: b -> c"),
    ],
    ids=["nested-generic", "callable", "star-args", "plain", "unclosed", "no-def"],
)
def test_strip_annotations_respects_brackets(text: str, want: str) -> None:
    assert strip_annotations(text) == want
