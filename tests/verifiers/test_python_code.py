"""The Python verifier: every test style passes and fails correctly; hostile candidates fail."""

from __future__ import annotations

import pytest

from tasksieve.schemas import TaskRecord
from tasksieve.verifiers.families.python.verifier import PythonVerifier, normalise_output


def task(**spec) -> TaskRecord:
    spec.setdefault("entry_point", "add" if spec["style"] != "io" else None)
    return TaskRecord(
        id="t1",
        family="code",
        prompt="add two numbers",
        reference_solution="",
        verifier={"family": "code", "timeout_s": 5, **spec},
    )


CHECK = task(
    style="check",
    test_code="def check(candidate):\n"
    "    assert candidate(1, 2) == 3\n    assert candidate(-1, 1) == 0\n",
)
ASSERTS = task(style="asserts", asserts=["assert add(1, 2) == 3", "assert add(2, 2) == 4"])
PYTEST = task(
    style="pytest",
    test_code="from solution import add\n\n"
    "def test_small():\n    assert add(1, 2) == 3\n\n"
    "def test_neg():\n    assert add(-1, -1) == -2\n",
)
IO = task(
    style="io", io_cases=[{"stdin": "1 2\n", "stdout": "3\n"}, {"stdin": "5 5", "stdout": "10"}]
)
GOOD = "def add(a, b):\n    return a + b\n"
WRONG = "def add(a, b):\n    return a - b\n"
IO_GOOD = "a, b = map(int, input().split())\nprint(a + b, '  ')\nprint()\n"
IO_WRONG = "a, b = map(int, input().split())\nprint(a * b)\n"
FUNCTION_TASKS = [CHECK, ASSERTS, PYTEST]


@pytest.mark.parametrize("t", [*FUNCTION_TASKS, IO], ids=["check", "asserts", "pytest", "io"])
def test_correct_solution_passes(verifier: PythonVerifier, t):
    v = verifier.verify(t, IO_GOOD if t.verifier.style == "io" else GOOD)
    assert v.status == "pass", v
    assert v.tests_passed == v.tests_total == len(v.checks) == 2


@pytest.mark.parametrize("t", [*FUNCTION_TASKS, IO], ids=["check", "asserts", "pytest", "io"])
def test_wrong_solution_fails(verifier: PythonVerifier, t):
    v = verifier.verify(t, IO_WRONG if t.verifier.style == "io" else WRONG)
    assert v.status == "fail" and v.tests_passed < v.tests_total, v


def test_partial_credit_is_counted(verifier):
    v = verifier.verify(CHECK, "def add(a, b):\n    return 3\n")
    assert v.status == "fail" and (v.tests_passed, v.tests_total) == (1, 2)


@pytest.mark.parametrize("t", FUNCTION_TASKS, ids=["check", "asserts", "pytest"])
def test_syntax_error_is_error(verifier, t):
    assert verifier.verify(t, "def add(a, b) return").status == "error"


def test_io_syntax_error_is_error(verifier):
    assert verifier.verify(IO, "print(").status == "error"


@pytest.mark.parametrize("t", FUNCTION_TASKS, ids=["check", "asserts", "pytest"])
def test_infinite_loop_is_timeout(verifier, t):
    slow = task(**{**t.verifier.model_dump(), "timeout_s": 1})
    v = verifier.verify(slow, "def add(a, b):\n    while True: pass\n")
    assert v.status == "timeout" and v.duration_s < 5


def test_io_sleep_is_timeout(verifier):
    slow = task(**{**IO.verifier.model_dump(), "timeout_s": 1})
    assert verifier.verify(slow, "import time; time.sleep(30)").status == "timeout"


def test_missing_entry_point_fails(verifier):
    v = verifier.verify(CHECK, "def plus(a, b):\n    return a + b\n")
    assert v.status == "fail" and v.tests_passed == 0


HOSTILE = {
    "sys_exit_at_import": "import sys\nsys.exit(0)\n",
    "os_exit_at_import": "import os\nos._exit(0)\n",
    "sys_exit_in_call": "import sys\ndef add(a, b):\n    sys.exit(0)\n",
    "os_exit_in_call": "import os\ndef add(a, b):\n    os._exit(0)\n",
    "fake_pass_output": 'print(\'{"op": "result", "name": "assert_0", "passed": true}\')\n'
    "print('{\"op\": \"done\"}')\nprint('2 passed, 0 failed')\n"
    "def add(a, b):\n    return None\n",
    "fake_protocol_on_real_fd": "import os, json\nfor fd in range(3, 10):\n"
    '    try: os.write(fd, b\'{"ok": 3}\\n{"ok": 0}\\n\')\n'
    "    except OSError: pass\n"
    "def add(a, b):\n    return None\n",
    "eq_always_true": "class A:\n    def __eq__(self, o): return True\n    __hash__ = None\n"
    "def add(a, b):\n    return A()\n",
    "int_subclass_eq": "class I(int):\n    def __eq__(self, o): return True\n"
    "def add(a, b):\n    return I(7)\n",
    "raise_skiptest": "import unittest\ndef add(a, b):\n    raise unittest.SkipTest('skip')\n",
    "raise_keyboardinterrupt": "def add(a, b):\n    raise KeyboardInterrupt\n",
    "patch_builtins_assert": "import builtins\nbuiltins.AssertionError = type('X', (Exception,),"
    " {})\ndef add(a, b):\n    return None\n",
    "kill_parent": "import os, signal\ntry: os.kill(os.getppid(), signal.SIGKILL)\n"
    "except OSError: pass\nos.kill(-1, signal.SIGKILL)\n",
    "close_pipes": "import os\nfor fd in range(0, 20):\n    try: os.close(fd)\n"
    "    except OSError: pass\ndef add(a, b):\n    return 3\n",
    "huge_return": "def add(a, b):\n    return 'x' * 50_000_000\n",
}


@pytest.mark.parametrize("t", FUNCTION_TASKS, ids=["check", "asserts", "pytest"])
@pytest.mark.parametrize("code", list(HOSTILE.values()), ids=list(HOSTILE))
def test_hostile_candidate_never_passes(verifier, t, code):
    v = verifier.verify(t, code)
    assert v.status != "pass" and v.status != "infra_error", v
    assert v.tests_passed < v.tests_total


@pytest.mark.parametrize(
    "code",
    [
        "import sys\nsys.exit(0)\n",
        "import os\nos._exit(0)\n",
        "print('3')\nimport sys; sys.exit(0)",
    ],
)
def test_io_hostile_exit_does_not_pass(verifier, code):
    assert verifier.verify(IO, code).status != "pass"


def test_tuple_and_nested_values_round_trip(verifier):
    t = task(
        style="asserts",
        entry_point="f",
        asserts=["assert f() == (1, [2.5, {'a': {3}}], None, b'x', frozenset({1}), {(1, 2): 'k'})"],
    )
    sol = "def f():\n    return (1, [2.5, {'a': {3}}], None, b'x', frozenset({1}), {(1, 2): 'k'})\n"
    assert verifier.verify(t, sol).status == "pass"


def test_candidate_exception_type_reaches_tests(verifier):
    t = task(
        style="pytest",
        entry_point="f",
        test_code=(
            "def test_raises():\n    try:\n        f(-1)\n    except ValueError:\n        return\n"
            "    raise AssertionError('no ValueError')\n"
        ),
    )
    assert verifier.verify(t, "def f(x):\n    raise ValueError('neg')\n").status == "pass"


def test_declared_but_unreachable_pytest_test_fails(verifier):
    code = "def test_a():\n    assert add(1, 1) == 2\n\ndef test_a():\n    assert True\n"
    v = verifier.verify(task(style="pytest", test_code=code), GOOD)
    assert v.tests_total == 2 and v.status == "fail"


def test_trivial_solutions_fail(verifier):
    sols = verifier.trivial_solutions(CHECK)
    assert len(sols) == 2 and all(verifier.verify(CHECK, s).status != "pass" for s in sols)


def test_io_normalisation():
    assert normalise_output("1  \r\n2\t\n\n\n") == normalise_output("1\n2") == "1\n2"


def test_pair_run_candidate_sees_no_other_process(sandbox, verifier):
    """On the fork server candidate and tests share one pid namespace; hidepid hides the tests."""
    if sandbox.describe()["executor"] != "forkserver":
        pytest.skip("pair runs need the fork server (root)")
    t = task(style="check", test_code="def check(candidate):\n    assert candidate(0, 0) == []\n")
    probe = (
        "import os\ndef add(a, b):\n"
        "    return [p for p in os.listdir('/proc') if p.isdigit() and int(p) != os.getpid()]\n"
    )
    assert verifier.verify(t, probe).status == "pass"
