"""Probes inside the contract, convention probes and the detectors' outcomes, on real code
tasks with the Python differ and the process sandbox."""

from __future__ import annotations

from typing import Any

from tasksieve.schemas import TaskRecord
from tasksieve.transforms.reliability.detectors import ambiguity_check
from tasksieve.verifiers.families.python.differ import PythonDiffer
from tasksieve.verifiers.families.python.verifier import PythonVerifier
from tasksieve.verifiers.reliability import (
    AmbiguityConfig,
    StrengthConfig,
    ambiguity_evidence,
    measure_ambiguity,
    measure_strength,
    probe_set,
)
from tasksieve.verifiers.sandbox.base import Sandbox

DIFFER = PythonDiffer()
CFG = AmbiguityConfig()


def task(prompt: str, entry: str, ref: str, asserts: list[str], **spec: Any) -> TaskRecord:
    return TaskRecord(
        id="t",
        family="code",
        prompt=prompt,
        reference_solution=ref,
        verifier={
            "family": "code",
            "style": "asserts",
            "entry_point": entry,
            "asserts": asserts,
            **spec,
        },
    )


DOUBLE = task(
    "Write double(n): twice n, for an integer n with 0 <= n <= 5.",
    "double",
    "def double(n):\n    return n * 2\n",
    ["assert double(0) == 0", "assert double(3) == 6", "assert double(5) == 10"],
)
# both agree with the reference on 0..5 and differ everywhere else
DOUBLE_ALTS = [
    (0, "def double(n):\n    return n * 2 if 0 <= n <= 5 else -1\n"),
    (1, "def double(n):\n    return n + n if n <= 5 else 0\n"),
]
BETWEEN = task(
    "Write between(x, lo, hi): whether the number x is between lo and hi.",
    "between",
    "def between(x, lo, hi):\n    return lo <= x <= hi\n",
    [
        "assert between(5, 1, 10) is True",
        "assert between(0, 1, 10) is False",
        "assert between(11, 1, 10) is False",
        "assert between(3, 2, 4) is True",
    ],
)
BETWEEN_ALTS = [
    (0, "def between(x, lo, hi):\n    return x >= lo and x <= hi\n"),
    (1, "def between(x, lo, hi):\n    return lo < x < hi\n"),
]


def test_a_probe_outside_a_stated_precondition_is_not_made(sandbox: Sandbox) -> None:
    got = probe_set(DIFFER, DOUBLE, 24, 0, sandbox, envelope=False)
    values = [p.payload["args"][0] for p in got.probes]
    assert values and all(0 <= v <= 5 for v in values)
    assert dict(got.dropped).get("precondition", 0) > 0
    assert all("0 <= n <= 5" in p.why for p in got.probes if p.origin == "derived")


def test_solutions_differing_only_outside_the_contract_are_not_ambiguous(
    sandbox: Sandbox,
) -> None:
    rep = measure_ambiguity(DOUBLE, DOUBLE_ALTS, DIFFER, sandbox, CFG)
    assert rep.disagreements == () and rep.outcome(CFG) == "unambiguous"


def test_an_input_outside_the_tests_envelope_is_not_probed(sandbox: Sandbox) -> None:
    digits = task(
        "Write digits(n): how many decimal digits n has.",
        "digits",
        "def digits(n):\n    return len(str(n))\n",
        ["assert digits(7) == 1", "assert digits(42) == 2", "assert digits(1234) == 4"],
    )
    alts = [
        (0, "def digits(n):\n    return len(str(abs(n)))\n"),
        (1, "def digits(n):\n    return len('%d' % abs(n))\n"),
    ]
    got = probe_set(DIFFER, digits, 24, 0, sandbox, envelope=True)
    assert all(p.payload["args"][0] >= 0 for p in got.probes)
    assert not measure_ambiguity(digits, alts, DIFFER, sandbox, CFG).ambiguous(CFG)


def test_an_input_the_reference_rejects_is_not_a_disagreement(sandbox: Sandbox) -> None:
    strict = task(
        "Write half(n): n halved.",
        "half",
        "def half(n):\n    if n % 2:\n        raise ValueError('odd')\n    return n // 2\n",
        ["assert half(4) == 2", "assert half(10) == 5", "assert half(0) == 0"],
        probe_inputs=["7", "9", "3"],
    )
    alts = [(0, "def half(n):\n    return n // 2\n"), (1, "def half(n):\n    return n >> 1\n")]
    rep = measure_ambiguity(strict, alts, DIFFER, sandbox, CFG)
    assert rep.tried - rep.valid >= 3  # the odd inputs: the reference raises
    assert not rep.ambiguous(CFG)


PARITY_ALTS = [
    (0, "def halve(n):\n    return n / 2\n"),
    (1, "def halve(n):\n    return n // 2 if n % 2 == 0 else n / 2\n"),
]


def _halve(**spec: Any) -> TaskRecord:
    return task(
        "Write halve(n): n divided by two.",
        "halve",
        "def halve(n):\n    return n // 2\n",
        ["assert halve(4) == 2", "assert halve(10) == 5", "assert halve(8) == 4"],
        **spec,
    )


def test_without_a_domain_odd_inputs_make_the_readings_disagree(sandbox: Sandbox) -> None:
    assert measure_ambiguity(_halve(), PARITY_ALTS, DIFFER, sandbox, CFG).ambiguous(CFG)


def test_the_input_domain_predicate_keeps_probes_inside_it(sandbox: Sandbox) -> None:
    even = _halve(input_domain={"predicate": "def valid(n):\n    return n % 2 == 0\n"})
    got = probe_set(DIFFER, even, 24, 0, sandbox, envelope=True)
    assert got.probes and all(p.payload["args"][0] % 2 == 0 for p in got.probes)
    assert dict(got.dropped)["input_domain"] > 0
    assert not measure_ambiguity(even, PARITY_ALTS, DIFFER, sandbox, CFG).ambiguous(CFG)


def test_the_input_domain_generator_supplies_probes(sandbox: Sandbox) -> None:
    gen = "def generate(seed, count):\n    return [[1000 + 2 * i] for i in range(count)]\n"
    made = _halve(input_domain={"generator": gen})
    got = probe_set(DIFFER, made, 6, 0, sandbox, envelope=True)
    assert [p.payload["args"][0] for p in got.probes if p.origin == "domain"] == [
        1000,
        1002,
        1004,
        1006,
        1008,
        1010,
    ]


def test_a_convention_probe_separates_two_readings(sandbox: Sandbox) -> None:
    rep = measure_ambiguity(BETWEEN, BETWEEN_ALTS, DIFFER, sandbox, CFG)
    assert rep.ambiguous(CFG)
    assert any("convention bounds" in d.why for d in rep.disagreements)


def test_the_evidence_shows_the_input_both_outputs_and_why_it_is_in_contract(
    sandbox: Sandbox,
) -> None:
    rep = measure_ambiguity(BETWEEN, BETWEEN_ALTS, DIFFER, sandbox, CFG)
    row = ambiguity_evidence(rep, CFG).splitlines()[1]
    assert row.startswith("on between(") and "(in contract: convention bounds" in row
    assert "reference: true" in row and "sample 1: false" in row


def test_a_mutant_that_only_takes_another_open_reading_is_not_weak_tests(
    sandbox: Sandbox, verifier: PythonVerifier
) -> None:
    rep = measure_strength(BETWEEN, verifier, DIFFER, sandbox, StrengthConfig())
    assert rep.open_convention >= 1 and not rep.weak(StrengthConfig())


def test_one_survivor_on_an_input_like_the_tests_own_is_weak_tests(
    sandbox: Sandbox, verifier: PythonVerifier
) -> None:
    above = task(
        "Write count_above(xs, t): how many items of xs are strictly greater than t.",
        "count_above",
        "def count_above(xs, t):\n    n = 0\n    for x in xs:\n        if x > t:\n"
        "            n += 1\n    return n\n",
        [
            "assert count_above([1, 5, 9], 4) == 2",
            "assert count_above([10, 20], 15) == 1",
            "assert count_above([3], 0) == 1",
        ],
    )
    rep = measure_strength(above, verifier, DIFFER, sandbox, StrengthConfig())
    assert rep.typical >= 1 and rep.weak(StrengthConfig())


def test_too_few_distinct_solutions_is_not_enough_evidence(sandbox: Sandbox) -> None:
    same = [(0, DOUBLE_ALTS[0][1]), (1, DOUBLE_ALTS[0][1]), (2, DOUBLE.reference_solution)]
    rep = measure_ambiguity(DOUBLE, same, DIFFER, sandbox, CFG)
    assert rep.distinct == 1 and rep.outcome(CFG) == "not_enough_evidence"
    assert ambiguity_check(rep, CFG).outcome == "not_enough_evidence"


def test_only_the_reference_s_own_text_is_not_enough_evidence(sandbox: Sandbox) -> None:
    rep = measure_ambiguity(DOUBLE, [(0, DOUBLE.reference_solution)], DIFFER, sandbox, CFG)
    assert rep.outcome(CFG) == "not_enough_evidence" and not rep.ambiguous(CFG)
