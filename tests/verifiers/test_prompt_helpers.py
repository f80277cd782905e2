"""Names the tests use besides the entry point come from trusted code, never from the candidate.

On both sandbox backends: a candidate that redefines a prompt helper, constant, class or
imported module (or tampers with builtins) gets the verdict its entry point earns; the
HumanEval problems whose tests call a prompt helper are judged the same way; a task opts in
to more candidate functions with ``candidate_names``.
"""

from __future__ import annotations

import ast
from typing import Any

import pytest

from tasksieve.schemas import TaskRecord
from tasksieve.verifiers.families.python.verifier import PythonVerifier
from tasksieve.verifiers.registry import make_sandbox
from tests.verifiers.hostile.prompt_helpers import CASES, CODEC_CHECK, TAMPERING, TASKS
from tests.verifiers.test_humaneval import PROBLEMS
from tests.verifiers.test_humaneval import _task as humaneval_task


@pytest.fixture(scope="module", params=["process", "docker"])
def verifier(request):
    """The Python verifier on each sandbox backend; docker skips, saying why, without an engine."""
    try:
        box = make_sandbox(request.param)
    except Exception as e:  # engine, SDK or image missing
        pytest.skip(f"{request.param} backend unavailable: {e}")
    yield PythonVerifier(box)
    box.close()


def _record(name: str, **spec: Any) -> TaskRecord:
    t = TASKS[name]
    return TaskRecord(
        id=f"helpers.{name}",
        family="code",
        prompt=t["prompt"],
        reference_solution=t["reference_solution"],
        verifier={**t["verifier"], **spec},
    )


def _verdicts(verifier: PythonVerifier, task: TaskRecord, correct: str, wrong: str) -> tuple:
    return verifier.verify(task, correct).status, verifier.verify(task, wrong).status


@pytest.mark.parametrize("name", sorted(TASKS))
def test_reference_passes(verifier, name):
    t = _record(name)
    assert verifier.verify(t, t.reference_solution).status == "pass"


@pytest.mark.parametrize("case", sorted(CASES))
def test_sabotaged_trusted_name_does_not_change_the_verdict(verifier, case):
    task, correct, wrong = CASES[case]
    assert _verdicts(verifier, _record(task), correct, wrong) == ("pass", "fail")


@pytest.mark.parametrize("case", sorted(TAMPERING))
def test_tampering_with_builtins_and_modules_does_not_reach_the_tests(verifier, case):
    task, correct, wrong = TAMPERING[case]
    assert _verdicts(verifier, _record(task), correct, wrong) == ("pass", "fail")


def test_trusted_code_that_raises_still_defines_what_follows(verifier):
    """A prose prompt, top-level prints, input(), missing imports, exit: later defs still land."""
    untidy = (
        "print('debugging')\nline = input()\nimport no_such_module\nraise SystemExit(3)\n"
        + TASKS["codec"]["reference_solution"]
        + "\nif __name__ == '__main__':\n    encode = None\n"
    )
    t = _record("codec").model_copy(
        update={"prompt": "Decode it (see encode).", "reference_solution": untidy}
    )
    assert verifier.verify(t, TASKS["codec"]["reference_solution"]).status == "pass"
    assert verifier.verify(t, "def decode(s):\n    return s\n").status == "fail"


# ------------------------------------------------------------------------ candidate_names
@pytest.mark.parametrize(
    ("names", "style"),
    [(["not a name"], "check"), (["class"], "check"), (["__eq__"], "check"), (["f"], "io")],
    ids=["not_identifier", "keyword", "dunder", "io_style"],
)
def test_candidate_names_are_validated(names, style):
    spec = {"style": style, "candidate_names": names}
    spec |= {"io_cases": [{"stdout": "1"}]} if style == "io" else {"test_code": CODEC_CHECK}
    with pytest.raises(ValueError, match="candidate_names"):
        _record("codec", **spec)


def test_candidate_functions_default_to_the_entry_point():
    assert _record("codec").verifier.candidate_functions() == ["decode"]
    opted = _record("codec", candidate_names=["encode", "decode"]).verifier
    assert opted.candidate_functions() == ["decode", "encode"]


ENCODE_TESTS = (
    "def test_encode():\n    assert encode('ab') == 'bc'\n\n"
    "def test_round_trip():\n    assert decode(encode('ab')) == 'ab'\n"
)
BOTH_RIGHT = (
    "def encode(s):\n    return ''.join(chr((ord(c) - 96) % 26 + 97) for c in s)\n\n"
    "def decode(s):\n    return ''.join(chr((ord(c) - 98) % 26 + 97) for c in s)\n"
)


def test_candidate_names_opt_in_tests_the_candidates_helper(verifier):
    t = _record("codec_reference_only", style="pytest", test_code=ENCODE_TESTS)
    opted = _record(
        "codec_reference_only", style="pytest", test_code=ENCODE_TESTS, candidate_names=["encode"]
    )
    identity = "def encode(s):\n    return s\n\ndef decode(s):\n    return s\n"
    assert verifier.verify(t, identity).tests_passed == 1  # encode is the reference's
    assert _verdicts(verifier, opted, BOTH_RIGHT, identity) == ("pass", "fail")
    assert verifier.verify(opted, identity).tests_passed == 1  # only the round trip


def test_undeclared_candidate_function_is_unreachable(verifier):
    tests = (
        "def test_twice():\n    assert twice(2) == 4\n\n"
        "def test_add():\n    assert add(1, 1) == 2\n"
    )
    t = TaskRecord(
        id="helpers.undeclared",
        family="code",
        prompt="Write add(a, b) and twice(n).",
        reference_solution="def add(a, b):\n    return a + b\n",
        verifier={"family": "code", "style": "pytest", "entry_point": "add", "test_code": tests},
    )
    sol = "def add(a, b):\n    return a + b\n\ndef twice(n):\n    return 2 * n\n"
    v = verifier.verify(t, sol)
    assert (v.status, v.tests_passed) == ("fail", 1)
    assert "twice" in v.detail


# ------------------------------------------------------------------------ HumanEval
def prompt_names_in_tests(problem: dict[str, str]) -> set[str]:
    """Names the prompt defines at top level, other than the entry point, that the tests read.

    Names the tests bind themselves (assignments, imports, parameters) do not count.
    """
    defined: set[str] = set()
    for st in ast.parse(problem["prompt"]).body:
        if isinstance(st, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            defined.add(st.name)
        elif isinstance(st, ast.Import | ast.ImportFrom):
            defined |= {(a.asname or a.name).split(".")[0] for a in st.names}
        elif isinstance(st, ast.Assign | ast.AnnAssign | ast.AugAssign):
            defined |= {
                n.id
                for n in ast.walk(st)
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
            }
    tree = ast.parse(problem["test"])
    read, bound = set(), set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Name):
            (read if isinstance(n.ctx, ast.Load) else bound).add(n.id)
        elif isinstance(n, ast.Import | ast.ImportFrom):
            bound |= {(a.asname or a.name).split(".")[0] for a in n.names}
        elif isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(n.name)
        elif isinstance(n, ast.arg):
            bound.add(n.arg)
    return (defined & read) - bound - {problem["entry_point"]}


# For each problem whose tests use a prompt helper: a wrong entry point and a redefinition of
# the helper that makes the tests pass if they used the candidate's helper.
HUMANEVAL_SABOTAGE = {
    "HumanEval/32": ("def find_zero(xs):\n    return 0.0\n", "def poly(xs, x):\n    return 0\n"),
    "HumanEval/38": (
        "def decode_cyclic(s):\n    return s\n",
        "def encode_cyclic(s):\n    return s\n",
    ),
    "HumanEval/50": (
        "def decode_shift(s):\n    return s\n",
        "def encode_shift(s):\n    return s\n",
    ),
}
HELPER_PROBLEMS = [p for p in PROBLEMS if prompt_names_in_tests(p)]


def test_every_humaneval_problem_using_a_prompt_helper_is_covered():
    assert {p["task_id"] for p in HELPER_PROBLEMS} == set(HUMANEVAL_SABOTAGE)


def _keep_own_helpers(problem: dict[str, str]) -> str:
    """The canonical solution, its entry point bound to a snapshot of its module's names."""
    e = problem["entry_point"]
    return (
        problem["prompt"]
        + problem["canonical_solution"]
        + f"\nimport types as _types\n{e} = _types.FunctionType({e}.__code__, dict(globals()), "
        f"{e}.__name__, {e}.__defaults__, {e}.__closure__)\n"
    )


@pytest.mark.parametrize("problem", HELPER_PROBLEMS, ids=[p["task_id"] for p in HELPER_PROBLEMS])
def test_humaneval_prompt_helper_sabotage(verifier, problem):
    helpers = prompt_names_in_tests(problem)
    raising = "".join(
        f"\ndef {h}(*a, **k):\n    raise RuntimeError('sabotaged')\n" for h in sorted(helpers)
    )
    wrong_entry, passing_helper = HUMANEVAL_SABOTAGE[problem["task_id"]]
    correct = _keep_own_helpers(problem) + raising
    wrong = problem["prompt"] + "    return None\n\n" + wrong_entry + "\n" + passing_helper
    assert _verdicts(verifier, humaneval_task(problem), correct, wrong) == ("pass", "fail")
