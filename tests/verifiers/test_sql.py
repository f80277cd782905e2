"""Tests for the SQL verifier: example tasks, hostile queries, perturbation, comparison rules."""

from __future__ import annotations

import json
import re
import uuid
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from tasksieve.schemas import SqlCompare, SqlSpec, TaskRecord
from tasksieve.transforms.samplers.extract import extract_solution
from tasksieve.verifiers.families.sql.compare import (
    Result,
    Tagged,
    compare_results,
    decode,
    values_equal,
)
from tasksieve.verifiers.families.sql.guest.worker import perturb_statements
from tasksieve.verifiers.families.sql.verifier import SqlVerifier
from tasksieve.verifiers.sandbox.process.sandbox import ProcessSandbox

pytest.importorskip("duckdb")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TASKS = [
    TaskRecord.model_validate_json(ln)
    for ln in (EXAMPLES / "tasks" / "sql.jsonl").read_text(encoding="utf-8").splitlines()
    if ln.strip()
]


def _replay() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for ln in (EXAMPLES / "replay" / "completions.jsonl").read_text().splitlines():
        if ln.strip():
            row = json.loads(ln)
            out.setdefault(row["task_id"], []).append(row["completion"])
    return out


def _readme_passes() -> dict[str, int]:
    rows = {}
    for ln in (EXAMPLES / "README.md").read_text(encoding="utf-8").splitlines():
        m = re.match(r"^\| `(sql\.[^`]+)` \|(?:[^|]*\|){4} (\d+) \|", ln)
        if m:
            rows[m.group(1)] = int(m.group(2))
    return rows


def _task(spec: dict[str, Any], tid: str = "sql.test") -> TaskRecord:
    return TaskRecord.model_validate(
        {
            "id": tid,
            "family": "sql",
            "prompt": "q",
            "verifier": {"family": "sql", **spec},
            "reference_solution": spec.get("reference_query") or "SELECT 1",
        }
    )


def _with(task: TaskRecord, **update: Any) -> TaskRecord:
    return task.model_copy(update={"verifier": task.verifier.model_copy(update=update)})


@pytest.fixture(scope="module")
def sqlv(sandbox: ProcessSandbox) -> Any:
    v = SqlVerifier(sandbox)
    yield v
    v.close()


ORDERS = TASKS[0]  # sql.count_shipped
PEOPLE = _task(
    {
        "setup_sql": "CREATE TABLE visits (name VARCHAR, city VARCHAR);\n"
        "INSERT INTO visits VALUES ('alice','x'),('alice','y'),('alice','z'),('bob','x');",
        "reference_query": "SELECT name, count(*) AS n FROM visits GROUP BY name",
        "perturb": True,
    }
)


# ----------------------------------------------------------------- example tasks
@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.id)
def test_reference_passes(sqlv: SqlVerifier, task: TaskRecord) -> None:
    v = sqlv.verify(task, task.reference_solution)
    assert v.status == "pass", v.detail
    assert [c.name for c in v.checks] == ["original"]


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.id)
def test_reference_passes_on_perturbed_copies(sqlv: SqlVerifier, task: TaskRecord) -> None:
    v = sqlv.verify(_with(task, perturb=True), task.reference_solution)
    assert v.status == "pass", v.detail
    assert [c.name for c in v.checks] == ["original", "perturbed_1", "perturbed_2"]


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.id)
def test_replay_pass_count_matches_readme(sqlv: SqlVerifier, task: TaskRecord) -> None:
    comps = _replay()[task.id]
    passed = sum(sqlv.verify(task, extract_solution(c, "sql")).passed for c in comps)
    assert passed == _readme_passes()[task.id]


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.id)
def test_trivial_solutions_fail(sqlv: SqlVerifier, task: TaskRecord) -> None:
    for sol in sqlv.trivial_solutions(task):
        assert not sqlv.verify(task, sol).passed, sol


# ----------------------------------------------------------------- statuses
def test_wrong_rows_fail_with_row_count(sqlv: SqlVerifier) -> None:
    v = sqlv.verify(ORDERS, "SELECT count(*) FROM orders UNION ALL SELECT 1")
    assert v.status == "fail" and "expected 1 rows, got 2" in v.detail


def test_wrong_value_fail_names_the_row(sqlv: SqlVerifier) -> None:
    v = sqlv.verify(TASKS[1], "SELECT name FROM customers WHERE city = 'Lisbon' ORDER BY name DESC")
    assert v.status == "fail" and "row 1 differs" in v.detail


def test_syntax_error_is_error_with_engine_message(sqlv: SqlVerifier) -> None:
    v = sqlv.verify(ORDERS, "SELEC count(*) FROM orders")
    assert v.status == "error" and "syntax error" in v.detail and "SELEC" in v.detail


def test_runtime_error_is_error_with_engine_message(sqlv: SqlVerifier) -> None:
    v = sqlv.verify(ORDERS, "SELECT no_such_column FROM orders")
    assert v.status == "error" and "no_such_column" in v.detail


def test_expected_rows_without_reference(sqlv: SqlVerifier) -> None:
    task = _task({"setup_sql": "CREATE TABLE t AS SELECT 41 AS a", "expected_rows": [[42]]})
    assert sqlv.verify(task, "SELECT a + 1 FROM t").passed
    assert sqlv.verify(task, "SELECT a FROM t").status == "fail"


def test_broken_setup_is_infra_error(sqlv: SqlVerifier) -> None:
    task = _task({"setup_sql": "CREATE TABLE t (", "expected_rows": [[1]]})
    assert sqlv.verify(task, "SELECT 1").status == "infra_error"


def test_broken_reference_is_infra_error(sqlv: SqlVerifier) -> None:
    task = _task({"setup_sql": "SELECT 1", "reference_query": "SELECT * FROM missing"})
    assert sqlv.verify(task, "SELECT 1").status == "infra_error"


def test_column_names_compared_only_when_asked(sqlv: SqlVerifier) -> None:
    q = "SELECT count(*) AS other_name FROM orders WHERE status = 'shipped'"
    assert sqlv.verify(ORDERS, q).passed
    strict = _with(ORDERS, compare=SqlCompare(column_names=True), expected_rows=None)
    v = sqlv.verify(strict, q)
    assert v.status == "fail" and "column names" in v.detail


def test_concurrent_verifications_use_separate_workers(sqlv: SqlVerifier) -> None:
    jobs = [(t, t.reference_solution) for t in TASKS] * 3
    with ThreadPoolExecutor(4) as pool:
        verdicts = list(pool.map(lambda j: sqlv.verify(*j), jobs))
    assert all(v.passed for v in verdicts)


# ----------------------------------------------------------------- hostile queries
SECRET = f"TASKSIEVE-SECRET-{uuid.uuid4().hex}"
SECRET_PATH = Path(f"/tmp/tasksieve-sql-secret-{uuid.uuid4().hex}.txt")
HOSTILE = {
    "read_csv_passwd": "SELECT * FROM read_csv('/etc/passwd')",
    "read_text_passwd": "SELECT content FROM read_text('/etc/passwd')",
    "read_blob_passwd": "SELECT content FROM read_blob('/etc/passwd')",
    "glob_etc": "SELECT * FROM glob('/etc/*')",
    "read_text_secret": f"SELECT content FROM read_text('{SECRET_PATH}')",
    "read_csv_secret": f"SELECT * FROM read_csv('{SECRET_PATH}', header=false)",
    "replacement_scan_secret": f"SELECT * FROM '{SECRET_PATH}'",
    "read_task_file": "SELECT count(*) FROM 'sales.csv'",
    "copy_to": "COPY orders TO 'out.csv'",
    "copy_select_to": "COPY (SELECT 3) TO '/tmp/x.csv'",
    "export_database": "EXPORT DATABASE 'dump'",
    "attach": f"ATTACH '{SECRET_PATH}' AS s",
    "install": "INSTALL httpfs",
    "load": "LOAD httpfs",
    "set_external_access": "SET enable_external_access = true",
    "reset_lock": "RESET lock_configuration",
    "unlock": "SET lock_configuration = false",
    "pragma": "PRAGMA enable_external_access",
    "call_pragma": "CALL pragma_version()",
    "smuggled_after_semicolon": "SELECT 3; SELECT content FROM read_text('/etc/passwd')",
    "smuggled_set": "SELECT 3; SET enable_external_access = true",
    "query_function_ddl": "SELECT * FROM query('DROP TABLE orders')",
    "ddl": "CREATE TABLE x AS SELECT 3",
    "drop": "DROP TABLE orders",
    "update": "UPDATE orders SET status = 'shipped'",
    "network": "SELECT * FROM read_csv('http://127.0.0.1:1/x.csv')",
    "huge_result": "SELECT * FROM range(100000000)",
    "huge_string": "SELECT length(repeat('a', 1500000000))",
    "recursive_doubling": "WITH RECURSIVE r(s) AS (SELECT 'x' UNION ALL SELECT s || s FROM r) "
    "SELECT count(*) FROM r",
    "empty": "",
    "comment_only": "-- nothing",
}


@pytest.fixture(scope="module")
def secret_file() -> Any:
    SECRET_PATH.write_text(f"{SECRET}\n{SECRET},{SECRET}\n")
    yield SECRET_PATH
    SECRET_PATH.unlink()


@pytest.mark.parametrize("sql", HOSTILE.values(), ids=HOSTILE.keys())
def test_hostile_query_is_contained(sqlv: SqlVerifier, secret_file: Path, sql: str) -> None:
    task = _with(ORDERS, timeout_s=3.0)
    v = sqlv.verify(task, sql)
    assert v.status in ("fail", "error", "timeout"), v.detail
    text = v.model_dump_json()
    assert SECRET not in text and "root:x:0" not in text
    assert secret_file.read_text().startswith(SECRET)  # untouched
    assert sqlv.verify(task, task.reference_solution).passed  # the worker is still sound


def test_cross_join_bomb_times_out_within_limit(sqlv: SqlVerifier) -> None:
    tables = ", ".join(f"orders t{i}" for i in range(16))
    v = sqlv.verify(_with(ORDERS, timeout_s=1.0), f"SELECT count(*) FROM {tables}")
    assert v.status == "timeout" and v.limit_hit == "wall"
    assert v.duration_s < 1.0 + 4.0


def test_recursive_cte_bomb_does_not_pass(sqlv: SqlVerifier) -> None:
    q = "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT count(*) FROM r"
    v = sqlv.verify(_with(ORDERS, timeout_s=1.0), q)
    assert v.status in ("timeout", "error") and v.duration_s < 1.0 + 4.0


# ----------------------------------------------------------------- perturbation
HARD_CODED = "SELECT 'alice' AS name, 3 AS n UNION ALL SELECT 'bob', 1"


def test_hard_coded_answer_passes_without_perturbation(sqlv: SqlVerifier) -> None:
    assert sqlv.verify(_with(PEOPLE, perturb=False), HARD_CODED).passed


def test_perturbation_catches_hard_coded_answer(sqlv: SqlVerifier) -> None:
    v = sqlv.verify(PEOPLE, HARD_CODED)
    assert v.status == "fail"
    got = [(c.name, c.passed) for c in v.checks][:2]
    assert got == [("original", True), ("perturbed_1", False)]


def test_perturbation_keeps_general_answer(sqlv: SqlVerifier) -> None:
    v = sqlv.verify(PEOPLE, "SELECT name, count(city) FROM visits GROUP BY ALL")
    assert v.passed and v.tests_passed == v.tests_total == 3


def test_perturbation_refreshes_keys_and_keeps_foreign_keys() -> None:
    cols = [("id", "INTEGER"), ("cid", "INTEGER"), ("amount", "DOUBLE"), ("tag", "VARCHAR")]
    (insert,) = perturb_statements("o", cols, {"id"}, {"cid"}, 1, 4)
    assert 'max("id")' in insert and '"cid"' in insert and "LIMIT" not in insert
    stmts = perturb_statements("o", cols, {"id"}, {"cid"}, 2, 4)
    assert '"amount" + 1.25' in stmts[0] and stmts[1].startswith('UPDATE "o" SET "amount"')
    assert perturb_statements("o", [("d", "DATE")], {"d"}, set(), 1, 4) == []


# ----------------------------------------------------------------- comparison rules
def _cmp(want: list[Any], got: list[Any], **rules: Any) -> str | None:
    w = Result(None, [tuple(decode(v) for v in r) for r in want])
    g = Result(None, [tuple(decode(v) for v in r) for r in got])
    return compare_results(w, g, SqlCompare(**rules))


def test_unordered_ignores_row_order() -> None:
    assert _cmp([[1], [2]], [[2], [1]]) is None


def test_ordered_requires_row_order() -> None:
    assert _cmp([[1], [2]], [[2], [1]], ordered=True) == "row 1 differs: expected (1,), got (2,)"


def test_multiset_counts_duplicates() -> None:
    assert _cmp([[1], [1], [2]], [[1], [2]]) == "expected 3 rows, got 2"


def test_set_semantics_ignore_duplicates() -> None:
    assert _cmp([[1], [1], [2]], [[2], [1]], multiset=False) is None
    assert _cmp([[1], [1], [2]], [[1], [2], [2]], multiset=False, ordered=True) is None


def test_float_tolerance() -> None:
    assert _cmp([[1.0]], [[1.0 + 1e-9]]) is None
    assert _cmp([[1.0]], [[1.001]]) is not None
    assert _cmp([[1.0]], [[1.001]], float_tol=0.01) is None


def test_unordered_tolerance_falls_back_to_matching() -> None:
    want = [[1.0000001, "b"], [1.0, "a"]]
    assert _cmp(want, [[1.0, "b"], [1.0000001, "a"]], float_tol=1e-3) is None


def test_null_equals_null_only() -> None:
    assert values_equal(None, None, 0.0)
    assert not values_equal(None, 0, 0.0) and not values_equal("", None, 0.0)


def test_decimal_and_int_compare_numerically() -> None:
    assert values_equal(decode({"$": "decimal", "v": "2.50"}), 2.5, 1e-6)
    assert values_equal(decode({"$": "decimal", "v": "3.00"}), 3, 1e-6)
    assert values_equal(3, 3.0, 0.0) and not values_equal(2**60, 2**60 + 1, 1e-6)


def test_bool_is_not_a_number() -> None:
    assert not values_equal(True, 1, 0.0) and values_equal(True, True, 0.0)


def test_nan_equals_nan() -> None:
    assert values_equal(decode({"$": "float", "v": "nan"}), float("nan"), 0.0)


def test_dates_equal_their_text() -> None:
    d = decode({"$": "date", "v": "2024-01-01"})
    assert d == Tagged("date", "2024-01-01") and values_equal(d, "2024-01-01", 0.0)
    ts = decode({"$": "timestamp", "v": "2024-01-01 10:00:00"})
    assert values_equal(ts, "2024-01-01T10:00:00", 0.0) and not values_equal(d, ts, 0.0)


def test_column_count_and_names() -> None:
    want = Result(["A", "b"], [(1, 2)])
    assert compare_results(want, Result(["x"], [(1,)]), SqlCompare()) == "expected 2 columns, got 1"
    names = SqlCompare(column_names=True)
    assert compare_results(want, Result(["a", "B"], [(1, 2)]), names) is None
    assert compare_results(want, Result(["a", "c"], [(1, 2)]), names)


def test_lists_and_structs_compare_by_value() -> None:
    got = decode({"$": "list", "v": [1, {"$": "decimal", "v": "2.0"}]})
    assert values_equal(got, decode([1, 2]), 1e-6)
    assert decode({"$": "struct", "v": [["a", 1]]}) == (("a", 1),)


def test_spec_defaults_are_multiset_unordered() -> None:
    spec = SqlSpec(setup_sql="", expected_rows=[[Decimal(1)]])
    assert spec.compare.multiset and not spec.compare.ordered


def test_many_distinct_setups_stay_within_the_worker_memory(sqlv: SqlVerifier) -> None:
    for i in range(24):
        task = _task({"setup_sql": f"CREATE TABLE t AS SELECT {i} AS a", "expected_rows": [[i]]})
        v = sqlv.verify(task, "SELECT a FROM t")
        assert v.passed, v.detail


def test_sequences_do_not_leak_between_candidates(sqlv: SqlVerifier) -> None:
    task = _task({"setup_sql": "CREATE SEQUENCE s", "expected_rows": [[1]]})
    for _ in range(3):
        assert sqlv.verify(task, "SELECT nextval('s')").passed
