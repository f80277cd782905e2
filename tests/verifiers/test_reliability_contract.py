"""The code task's input contract read from its statement and tests, the convention inputs,
and the ``input_domain`` field's validation (all on the host, no sandbox)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from tasksieve.schemas import CodeSpec
from tasksieve.verifiers.families.python.contract import Envelope, params, preconditions
from tasksieve.verifiers.families.python.conventions import made, topics


def _holds(prompt: str, names: list[str], **values: Any) -> bool:
    rules = preconditions(prompt, names, values)
    return all(r.holds(values) for r in rules)


@pytest.mark.parametrize(
    ("prompt", "names", "inside", "outside"),
    [
        ("Return n squared for 0 <= n <= 100.", ["n"], {"n": 100}, {"n": 101}),
        ("Return n squared for 0 <= n <= 100.", ["n"], {"n": 0}, {"n": -1}),
        ("1 <= a, b <= 10**6.", ["a", "b"], {"a": 1, "b": 10**6}, {"a": 1, "b": 0}),
        (
            "Whether x is between lo and hi (lo < hi).",
            ["x", "lo", "hi"],
            {"x": 0, "lo": 1, "hi": 2},
            {"x": 0, "lo": 2, "hi": 2},
        ),
        ("Whether n (n >= 2) is prime.", ["n"], {"n": 2}, {"n": 1}),
        ("For an integer score 0-100.", ["score"], {"score": 100}, {"score": 101}),
        ("xs is a non-empty list of integers.", ["xs"], {"xs": [0]}, {"xs": []}),
        ("xs is a list of non-negative integers.", ["xs"], {"xs": [0, 3]}, {"xs": [1, -1]}),
        ("xs holds at least two distinct integers.", ["xs"], {"xs": [1, 2]}, {"xs": [3, 3]}),
        ("s contains lowercase letters only.", ["s"], {"s": "abc"}, {"s": "aBc"}),
        ("s is a string of digits.", ["s"], {"s": "0123"}, {"s": "12a"}),
        ("s consists only of the characters '(' and ')'.", ["s"], {"s": "()"}, {"s": "(x)"}),
        (
            "Words are separated by single spaces, with no leading or trailing space.",
            ["s"],
            {"s": "a b"},
            {"s": "a  b"},
        ),
        (
            "Words are separated by single spaces, with no leading or trailing space.",
            ["s"],
            {"s": "a b"},
            {"s": " a b"},
        ),
        (
            "a and b have the same length.",
            ["a", "b"],
            {"a": "ab", "b": "cd"},
            {"a": "ab", "b": "c"},
        ),
    ],
)
def test_a_stated_precondition_admits_inside_and_rejects_outside(
    prompt: str, names: list[str], inside: dict[str, Any], outside: dict[str, Any]
) -> None:
    assert _holds(prompt, names, **inside)
    assert not _holds(prompt, names, **outside)


@pytest.mark.parametrize(
    "prompt",
    [
        "Return 'positive', 'negative' or 'zero' for an integer n.",  # quoted output words
        "Return the string of binary digits of n.",  # a rule about strings, n is a number
        "Write f(n): n doubled.",
        "Return the numbers 1 to n. For n < 1 return an empty list.",  # a case, not a rule
        "Return n halved; if n < 0 raise ValueError.",
        "Return 0 when n <= 0.",
    ],
)
@pytest.mark.parametrize("n", [-7, 0, 5])
def test_prose_that_states_nothing_about_the_input_restricts_nothing(prompt: str, n: int) -> None:
    assert _holds(prompt, ["n"], n=n)


def test_parameters_are_read_from_the_reference() -> None:
    assert params("def f(a, b=2, *c):\n    return a\n", "f") == ["a", "b"]
    assert params("def g(x):\n    return x\n", "f") == []


@pytest.mark.parametrize(
    ("probe", "fits"),
    [
        ((["abc"], {}), True),
        ((["ABC"], {}), False),  # uppercase never seen in the tests
        ((["a b"], {}), False),  # nor whitespace
        (([""], {}), False),  # nor the empty string
        (([3], {}), False),  # another type
    ],
)
def test_the_envelope_keeps_the_shape_of_the_tests_inputs(
    probe: tuple[list[Any], dict[str, Any]], fits: bool
) -> None:
    env = Envelope.of([(["hello"], {}), (["xyz"], {})])
    assert env.admits(probe) is fits


def test_a_negative_number_fits_only_when_the_tests_had_one() -> None:
    assert not Envelope.of([([3], {})]).admits(([-1], {}))
    assert Envelope.of([([3], {}), ([-2], {})]).admits(([-1], {}))


def test_a_convention_is_open_unless_the_statement_settles_it() -> None:
    assert topics("Whether x is between lo and hi.")["bounds"] is True
    assert topics("Whether x is strictly between lo and hi.")["bounds"] is False
    assert "rounding" not in topics("Return the sum of xs.")


@pytest.mark.parametrize(
    ("prompt", "seed", "topic", "expected"),
    [
        ("Whether x is between lo and hi.", ([5, 1, 10], {}), "bounds", ([1, 1, 10], {})),
        ("The words sorted by length.", ([["bb", "a"]], {}), "ties", ([["a", "bb"]], {})),
        ("x rounded to the nearest integer.", ([1.2], {}), "rounding", ([2.5], {})),
        ("Count the words of s.", (["a b"], {}), "whitespace", (["a  b"], {})),
        ("Count the words of s.", (["ab"], {}), "case", (["AB"], {})),
        ("The mean of xs.", ([[1, 2]], {}), "empty", ([[]], {})),
    ],
)
def test_convention_inputs_separate_the_common_readings(
    prompt: str, seed: Any, topic: str, expected: Any
) -> None:
    got = [m.call for m in made(prompt, [seed]) if m.topic == topic]
    assert expected in got


def test_round_numbers_are_landmarks_not_conventions() -> None:
    got = [m for m in made("Whether year is a leap year.", [([2024], {})]) if m.topic == "landmark"]
    assert ([2100], {}) in [m.call for m in got] and not any(m.open for m in got)


def _spec(**domain: Any) -> dict[str, Any]:
    return {
        "style": "asserts",
        "entry_point": "f",
        "asserts": ["assert f(1) == 1"],
        "input_domain": domain,
    }


def test_input_domain_takes_a_predicate_and_a_generator() -> None:
    spec = CodeSpec.model_validate(
        _spec(
            predicate="def valid(n):\n    return 0 <= n <= 9\n",
            generator="def generate(seed, count):\n    return [[i] for i in range(count)]\n",
        )
    )
    assert spec.input_domain is not None and spec.input_domain.predicate


@pytest.mark.parametrize(
    ("domain", "message"),
    [
        ({}, "needs a predicate, a generator or both"),
        ({"predicate": "def valid(n) return n"}, "not valid Python"),
        ({"predicate": "def check(n):\n    return True\n"}, "function valid"),
        ({"generator": "valid = lambda n: True\n"}, "function generate"),
        ({"predicate": "def valid(n):\n    return True\n", "extra": 1}, "Extra inputs"),
        ({"predicate": 3}, "string"),
        ({"predicate": "#" * 20_001}, "at most 20000"),
    ],
)
def test_a_bad_input_domain_is_rejected_with_how_to_fix_it(
    domain: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        CodeSpec.model_validate(_spec(**domain))


def test_an_io_task_takes_no_generator() -> None:
    with pytest.raises(ValidationError, match=r"only input_domain\.predicate"):
        CodeSpec.model_validate(
            {
                "style": "io",
                "io_cases": [{"stdin": "1", "stdout": "1"}],
                "input_domain": {"generator": "def generate(seed, count):\n    return []\n"},
            }
        )
