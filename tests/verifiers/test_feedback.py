"""Feedback messages: what each level reveals of the hidden tests, and nothing more."""

from __future__ import annotations

import pytest

from tasksieve.schemas import CheckResult, TaskRecord, Verdict
from tasksieve.verifiers.families.python.verifier import PythonVerifier
from tasksieve.verifiers.families.sql.verifier import SqlVerifier
from tasksieve.verifiers.feedback import (
    CHECK_CHARS,
    DEFAULT_LEVEL,
    MAX_CHARS,
    MAX_CHECKS,
    error_types,
    feedback_message,
    resolve_level,
)
from tasksieve.verifiers.sandbox.process.sandbox import ProcessSandbox

# Markers standing for hidden test content: a check name, a check detail, the verdict detail
# and an API trace entry. None of them looks like an error type.
HIDDEN_NAME = "test_hidden_case_q7"
HIDDEN_INPUT = "expected 48213 for input [913, 77]"
HIDDEN_DETAIL = "secret table row ('zq-omega', 31337)"
HIDDEN_TRACE = "s3.GetObject vault/secret-key 200"


def _verdict(status: str = "fail") -> Verdict:
    return Verdict(
        status=status,  # type: ignore[arg-type]
        tests_passed=1,
        tests_total=3,
        detail=f"{HIDDEN_NAME}: ValueError: {HIDDEN_DETAIL}",
        checks=[
            CheckResult(name="visible_ok", passed=True, detail="ok"),
            CheckResult(name=HIDDEN_NAME, passed=False, detail=f"AssertionError: {HIDDEN_INPUT}"),
            CheckResult(name="test_other", passed=False, detail="not run"),
        ],
        trace=[HIDDEN_TRACE],
    )


SECRETS = (HIDDEN_NAME, HIDDEN_INPUT, HIDDEN_DETAIL, HIDDEN_TRACE, "913", "31337")


@pytest.mark.parametrize("family", ["code", "sql", "config", "api"])
@pytest.mark.parametrize("status", ["fail", "error", "timeout"])
@pytest.mark.parametrize("level", ["none", "summary"])
def test_lower_levels_reveal_no_test_content(family: str, status: str, level: str) -> None:
    text = feedback_message(_verdict(status), family, level)
    for secret in SECRETS:
        assert secret not in text


@pytest.mark.parametrize("status", ["fail", "error", "timeout"])
def test_none_reveals_no_counts_and_no_error_types(status: str) -> None:
    text = feedback_message(_verdict(status), "code", "none")
    assert "1 of 3" not in text
    assert "AssertionError" not in text and "ValueError" not in text


def test_summary_gives_counts_and_error_types_only() -> None:
    text = feedback_message(_verdict(), "code", "summary")
    assert "1 of 3 checks passed" in text
    assert "ValueError" in text and "AssertionError" in text


@pytest.mark.parametrize("family", ["code", "sql", "config", "api"])
def test_failing_shows_the_failing_checks_and_the_message(family: str) -> None:
    text = feedback_message(_verdict(), family, "failing")
    assert f"{HIDDEN_NAME}: AssertionError: {HIDDEN_INPUT}" in text
    assert HIDDEN_DETAIL in text
    assert "visible_ok" not in text  # passing checks are not listed


def test_failing_never_shows_the_trace() -> None:
    assert HIDDEN_TRACE not in feedback_message(_verdict(), "api", "failing")


def test_sql_error_types_are_the_engine_class_and_the_verifier_label() -> None:
    v = Verdict(
        status="error",
        detail="runtime error: Conversion Error: Could not convert string 'zq-omega' to INT32",
    )
    assert error_types(v, "sql") == ["runtime error", "Conversion Error"]
    assert "zq-omega" not in feedback_message(v, "sql", "summary")


def test_failing_lists_at_most_max_checks_and_cuts_each() -> None:
    checks = [CheckResult(name=f"t{i}", passed=False, detail="x" * 1000) for i in range(9)]
    v = Verdict(status="fail", tests_total=9, checks=checks)
    text = feedback_message(v, "code", "failing")
    assert f"t{MAX_CHECKS - 1}:" in text and f"t{MAX_CHECKS}:" not in text
    assert f"and {9 - MAX_CHECKS} more" in text
    assert "x" * (CHECK_CHARS + 1) not in text


def test_the_whole_message_is_cut_to_max_chars() -> None:
    checks = [CheckResult(name="t" * 900, passed=False, detail="y" * 900) for _ in range(5)]
    v = Verdict(status="fail", detail="z" * 5000, checks=checks)
    text = feedback_message(v, "code", "failing")
    assert len(text) <= MAX_CHARS
    assert text.endswith("as before.")  # the instruction to retry survives the cut


@pytest.mark.parametrize("level", ["", "all", "FAILING", "tests"])
def test_unknown_level_is_refused(level: str) -> None:
    with pytest.raises(ValueError, match="none, summary, failing"):
        feedback_message(_verdict(), "code", level)


@pytest.mark.parametrize(
    ("task", "run", "want"),
    [
        (None, None, DEFAULT_LEVEL),
        ("none", None, "none"),
        ("failing", "none", "none"),
        (None, "failing", "failing"),
        ("none", "failing", "failing"),
    ],
)
def test_the_run_flag_overrides_the_task_which_overrides_the_default(
    task: str | None, run: str | None, want: str
) -> None:
    assert resolve_level(task, run) == want  # type: ignore[arg-type]


# ---------------------------------------------------------------- real verdicts
SECRET_ARG, SECRET_WANT = 48213, 96426
SECRET_CITY = "Zyxtown"


def _code_task() -> TaskRecord:
    return TaskRecord.model_validate(
        {
            "id": "t.double",
            "family": "code",
            "prompt": "Write double(x).",
            "verifier": {
                "family": "code",
                "style": "asserts",
                "entry_point": "double",
                "asserts": [
                    "assert double(1) == 2",
                    f"assert double({SECRET_ARG}) == {SECRET_WANT}, 'double({SECRET_ARG})'",
                ],
            },
            "reference_solution": "def double(x):\n    return 2 * x\n",
        }
    )


def _sql_task() -> TaskRecord:
    return TaskRecord.model_validate(
        {
            "id": "t.cities",
            "family": "sql",
            "prompt": "Count the customers per city in customers(name, city).",
            "verifier": {
                "family": "sql",
                "setup_sql": "CREATE TABLE customers (name VARCHAR, city VARCHAR);\n"
                f"INSERT INTO customers VALUES ('b', '{SECRET_CITY}'), ('c', '{SECRET_CITY}');\n",
                "reference_query": "SELECT city, count(*) AS n FROM customers GROUP BY city",
            },
            "reference_solution": "SELECT city, count(*) AS n FROM customers GROUP BY city",
        }
    )


@pytest.mark.parametrize("level", ["none", "summary"])
def test_a_real_python_verdict_keeps_its_asserts_hidden(
    verifier: PythonVerifier, level: str
) -> None:
    task = _code_task()
    verdict = verifier.verify(task, "def double(x):\n    return x + 1 if x > 5 else 2 * x\n")
    assert verdict.status == "fail" and str(SECRET_ARG) in verdict.model_dump_json()
    text = feedback_message(verdict, "code", level)
    assert str(SECRET_ARG) not in text and str(SECRET_WANT) not in text


def test_a_real_python_verdict_shows_its_failing_assert_at_failing(
    verifier: PythonVerifier,
) -> None:
    verdict = verifier.verify(
        _code_task(), "def double(x):\n    return x + 1 if x > 5 else 2 * x\n"
    )
    assert str(SECRET_ARG) in feedback_message(verdict, "code", "failing")


@pytest.mark.parametrize("level", ["none", "summary"])
def test_a_real_sql_verdict_keeps_its_data_hidden(sandbox: ProcessSandbox, level: str) -> None:
    sqlv = SqlVerifier(sandbox)
    try:
        wrong = "SELECT city, count(*) + 1 AS n FROM customers GROUP BY city"
        verdict = sqlv.verify(_sql_task(), wrong)
    finally:
        sqlv.close()
    assert verdict.status == "fail" and SECRET_CITY in verdict.model_dump_json()
    assert SECRET_CITY not in feedback_message(verdict, "sql", level)
