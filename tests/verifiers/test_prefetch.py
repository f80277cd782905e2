"""A check's leading certain calls sent in one message: which calls, and verdicts unchanged.

``leading_calls`` is checked on the statement shapes it must take and refuse; then stateful,
hanging and crashing candidates get the same per-check results with the calls sent ahead (the
fork server's pair and multi-sample runs) as on the relay path, which asks one call at a time.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

import pytest

from tasksieve.schemas import TaskRecord
from tasksieve.verifiers.families.python.guest.prefetch import PURE, leading_calls
from tasksieve.verifiers.families.python.verifier import PythonVerifier
from tasksieve.verifiers.sandbox.process.sandbox import ProcessSandbox

CANDS = {"candidate": "f", "f": "f"}


def calls(body: str) -> list[tuple[str, list, dict]]:
    fn = ast.parse("def check(candidate):\n" + body).body[0]
    assert isinstance(fn, ast.FunctionDef)
    return leading_calls(fn.body, CANDS, set(PURE))


def test_literal_asserts_are_sent_ahead_in_order() -> None:
    got = calls(
        "    assert candidate(1, [2]) == 3\n    x = 5\n    assert abs(candidate(2.5) - 1) < 1e-6\n"
        "    assert f(k=(1, 2)) is None\n    assert not candidate({'a': -1})\n"
    )
    assert got == [("f", [1, [2]], {}), ("f", [2.5], {}), ("f", [], {"k": (1, 2)}), ("f", [{"a": -1}], {})]  # fmt: skip  # noqa: E501


@pytest.mark.parametrize(
    "stmt",
    [
        "    assert candidate(x) == 1\n",  # a name as argument
        "    assert helper(1) == candidate(1)\n",  # a trusted call before it (may call f)
        "    assert candidate(1) == EXPECTED\n",  # a trusted object (its __eq__ may call f)
        "    assert candidate(1) == 1 and candidate(2) == 2\n",  # two calls, the second maybe not
        "    assert candidate(1) == 1, 'msg'\n",  # a message
        "    for i in range(3):\n        assert candidate(i) == i\n",  # a loop
        "    g = candidate\n",  # an alias
        "    assert candidate(*[1]) == 1\n",  # starred
        "    assert [1][0] == candidate(1)\n",  # a subscript before the call
        "    assert sorted([2, 1], reverse=True) == candidate(1)\n",  # keywords to a builtin
    ],
)
def test_uncertain_statements_end_the_run(stmt: str) -> None:
    assert calls("    assert candidate(0) == 0\n" + stmt + "    assert candidate(9) == 9\n") == [
        ("f", [0], {})
    ]


def test_a_redefined_builtin_is_not_pure() -> None:
    fn = ast.parse("def check(candidate):\n    assert abs(candidate(1)) == 1\n").body[0]
    assert isinstance(fn, ast.FunctionDef)
    assert leading_calls(fn.body, CANDS, set(PURE) - {"abs"}) == []


def task(test_code: str) -> TaskRecord:
    return TaskRecord(
        id="pf",
        family="code",
        prompt="p",
        reference_solution="def f(a):\n    return a\n",
        verifier={"family": "code", "style": "check", "entry_point": "f",
                  "timeout_s": 1, "test_code": test_code},
    )  # fmt: skip


# Calls 1-3 are sent ahead, then a statement that is not certain, then more certain ones.
MIXED = task(
    "def check(candidate):\n    assert candidate(1) == 1\n    assert candidate(2) == 2\n"
    "    assert candidate(3) == 3\n    x = [4]\n    assert candidate(*x) == 4\n"
    "    assert candidate(5) == 5\n"
)
SAMPLES = [
    "def f(a):\n    return a\n",
    # stateful: right only for the first three calls it gets
    "n = 0\ndef f(a):\n    global n\n    n += 1\n    return a if n <= 3 else -1\n",
    # answers by call order: a reordering shows as failures
    "seen = []\ndef f(a):\n    seen.append(a)\n"
    "    return a if seen == list(range(1, len(seen) + 1)) else -1\n",
    "def f(a):\n    if a == 2:\n        while True:\n            pass\n    return a\n",  # hangs
    "import os\ndef f(a):\n    if a == 3:\n        os._exit(1)\n    return a\n",  # dies at 3
    "def f(a):\n    if a == 1:\n        raise ValueError('no')\n    return a\n",
]


@pytest.fixture(scope="module")
def relay() -> Iterator[PythonVerifier]:
    box = ProcessSandbox(warm=False)  # no fork server: the host relays one call at a time
    yield PythonVerifier(box)
    box.close()


def test_verdicts_match_one_call_at_a_time(
    sandbox: ProcessSandbox, verifier: PythonVerifier, relay: PythonVerifier
) -> None:
    if not sandbox.capabilities.paired_runs:
        pytest.skip("needs the fork server (root with bubblewrap)")
    ahead = [verifier.verify(MIXED, s) for s in SAMPLES] + verifier.verify_many(MIXED, SAMPLES)
    alone = [relay.verify(MIXED, s) for s in SAMPLES] * 2
    for a, b in zip(ahead, alone, strict=True):
        assert a.status == b.status, (a, b)
        assert [c.passed for c in a.checks] == [c.passed for c in b.checks], (a, b)
