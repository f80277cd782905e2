"""The SQL differ: AST mutants, database variations as probes, observations, agreement rules."""

from __future__ import annotations

from typing import Any

import pytest

from tasksieve.schemas import TaskRecord
from tasksieve.verifiers.families.probes import Observation, Probe, ProbeInfraError
from tasksieve.verifiers.families.sql import mutate
from tasksieve.verifiers.families.sql.differ import SqlDiffer
from tasksieve.verifiers.sandbox.process.sandbox import ProcessSandbox

pytest.importorskip("duckdb")

SETUP = (
    "CREATE TABLE customers (id INTEGER PRIMARY KEY, name VARCHAR, city VARCHAR);\n"
    "INSERT INTO customers VALUES (1, 'Rui', 'Lisbon'), (2, 'Ines', 'Porto'),"
    " (3, 'Ana', 'Lisbon');\n"
    "CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER, amount DOUBLE);\n"
    "INSERT INTO orders VALUES (10, 1, 5.0), (11, 2, 7.5), (12, 1, 1.0), (13, 3, 2.0);\n"
)
RICH = (
    "SELECT DISTINCT c.name, count(*) AS n, sum(o.amount) AS total FROM customers c "
    "LEFT JOIN orders o ON o.customer_id = c.id WHERE o.amount >= 2 AND c.city = 'Lisbon' "
    "GROUP BY c.name HAVING sum(o.amount) > 1 ORDER BY n DESC LIMIT 5"
)


LIMITS = {"timeout", "too_large", "memory", "crash"}


def _task(query: str, **compare: Any) -> TaskRecord:
    spec: dict[str, Any] = {"family": "sql", "setup_sql": SETUP, "reference_query": query}
    if compare:
        spec["compare"] = compare
    return TaskRecord.model_validate(
        {
            "id": "sql.t",
            "family": "sql",
            "prompt": "q",
            "verifier": spec,
            "reference_solution": query,
        }
    )


@pytest.fixture(scope="module")
def sandbox() -> ProcessSandbox:
    return ProcessSandbox()


# ---------------------------------------------------------------- mutants
def test_every_operator_applies_to_a_query_that_has_its_construct() -> None:
    ops = {m.operator for m in SqlDiffer().mutants(_task(RICH), 200, 0)}
    assert ops == {
        "sql.compare_flip",
        "sql.logic_flip",
        "sql.join_kind",
        "sql.aggregate_swap",
        "sql.distinct",
        "sql.order_flip",
        "sql.order_drop",
        "sql.limit",
        "sql.constant",
    }


def test_mutants_parse_and_differ_from_the_reference() -> None:
    base = mutate.normalise(RICH)
    made = SqlDiffer().mutants(_task(RICH), 200, 0)
    assert len(made) > 20
    for m in made:
        assert mutate.normalise(m.solution) == m.solution  # parses again, renders the same
        assert m.solution != base
    assert len({m.solution for m in made}) == len(made)


@pytest.mark.parametrize("limit", [0, 1, 4, 9])
def test_mutants_are_capped_and_keep_operators_varied(limit: int) -> None:
    made = SqlDiffer().mutants(_task(RICH), limit, 3)
    assert len(made) == limit
    assert len({m.operator for m in made}) == limit  # round-robin: 9 operators, one each


def test_mutants_are_deterministic_for_a_seed_and_vary_with_it() -> None:
    d = SqlDiffer()
    one = [m.solution for m in d.mutants(_task(RICH), 6, 1)]
    assert one == [m.solution for m in d.mutants(_task(RICH), 6, 1)]
    others = {tuple(m.solution for m in d.mutants(_task(RICH), 6, s)) for s in range(2, 8)}
    assert any(o != tuple(one) for o in others)


@pytest.mark.parametrize(
    "query", ["SELEC 1", "CREATE TABLE t (a INT)", "SELECT 1; SELECT 2", "DELETE FROM orders"]
)
def test_a_reference_duckdb_cannot_serialise_gives_no_mutants(query: str) -> None:
    assert SqlDiffer().mutants(_task(query), 10, 0) == []


# ---------------------------------------------------------------- probes
def test_probes_are_capped_deterministic_and_skip_the_verifiers_own_perturbations() -> None:
    d = SqlDiffer()
    task = _task("SELECT 1")
    assert d.probes(task, 4, 0) == d.probes(task, 4, 0)
    assert len(d.probes(task, 4, 0)) == 4
    perturbed = task.model_copy(
        update={"verifier": task.verifier.model_copy(update={"perturb": True})}
    )
    seeds = {p.payload["seed"] for p in d.probes(perturbed, 20, 0)}
    assert seeds.isdisjoint({1, 2})  # the verifier itself checks perturbed_1 and perturbed_2


def _probe(vary: str | None, seed: int = 0) -> Probe:
    return Probe("p", {"seed": seed, "vary": vary, "index": 0, "salt": 0}, "variation")


def _rows(o: Observation) -> list[Any]:
    import json

    return list(json.loads(o.value)["rows"])


def test_the_reference_observed_on_the_original_database_gives_its_own_rows(
    sandbox: ProcessSandbox,
) -> None:
    q = "SELECT name, city FROM customers ORDER BY id"
    (row,) = SqlDiffer().observe(_task(q), [q], [_probe(None)], sandbox)
    assert row[0].ok
    assert _rows(row[0]) == [["Rui", "Lisbon"], ["Ines", "Porto"], ["Ana", "Lisbon"]]


@pytest.mark.parametrize(
    ("vary", "query", "check"),
    [
        ("nulls", "SELECT count(*) FILTER (WHERE city IS NULL) FROM customers", lambda n: n > 0),
        (
            "empty",
            "SELECT (SELECT count(*) FROM customers) + (SELECT count(*) FROM orders)",
            lambda n: n == 0,
        ),
        ("duplicates", "SELECT count(*) FROM customers", lambda n: n == 3),  # keyed: untouched
    ],
)
def test_variations_change_the_database_as_documented(
    sandbox: ProcessSandbox, vary: str, query: str, check: Any
) -> None:
    (row,) = SqlDiffer().observe(_task(query), [query], [_probe(vary)], sandbox)
    assert row[0].ok and check(_rows(row[0])[0][0])


def test_solutions_are_observed_on_every_probe_and_equal_queries_agree(
    sandbox: ProcessSandbox,
) -> None:
    ref = "SELECT city, count(*) AS n FROM customers GROUP BY city"
    same = "SELECT city, count(id) AS n FROM customers GROUP BY ALL"
    wrong = "SELECT city, count(DISTINCT name) AS n FROM customers GROUP BY city"
    d = SqlDiffer()
    task = _task(ref)
    probes = d.probes(task, 10, 0)
    seen = d.observe(task, [ref, same, wrong], probes, sandbox)
    assert [len(r) for r in seen] == [len(probes)] * 3
    assert all(d.agree(task, a, b) for a, b in zip(seen[0], seen[1], strict=True))
    assert not all(d.agree(task, a, b) for a, b in zip(seen[0], seen[2], strict=True))


@pytest.mark.parametrize(
    ("hostile", "kind"),
    [
        ("SELECT * FROM range(100000000000) a, range(100000000000) b", LIMITS),
        ("DROP TABLE customers", {"not_select"}),
        ("SELECT * FROM read_csv('/etc/passwd')", {"runtime"}),
        ("SELECT 1; SELECT 2", {"statements"}),
    ],
)
def test_hostile_solutions_stay_contained(
    sandbox: ProcessSandbox, hostile: str, kind: set[str]
) -> None:
    ref = "SELECT count(*) AS n FROM customers"
    task = _task(ref).model_copy(
        update={"verifier": _task(ref).verifier.model_copy(update={"timeout_s": 2.0})}
    )
    d = SqlDiffer()
    probes = [_probe(None), _probe("nulls")]
    seen = d.observe(task, [ref, hostile, ref], probes, sandbox)
    assert all(not o.ok and o.value in kind for o in seen[1])
    assert all(d.agree(task, a, b) and a.ok for a, b in zip(seen[0], seen[2], strict=True))


def test_a_worker_that_cannot_start_is_an_infra_error(sandbox: ProcessSandbox) -> None:
    with pytest.raises(ProbeInfraError):
        SqlDiffer(python="/nonexistent/python3").observe(
            _task("SELECT 1"), ["SELECT 1"], [_probe(None)], sandbox
        )


# ---------------------------------------------------------------- agreement
def _obs(rows: list[list[Any]], columns: tuple[str, ...] = ("a", "b")) -> Observation:
    return Observation.of({"columns": list(columns), "rows": rows})


@pytest.mark.parametrize(
    ("compare", "a", "b", "agree"),
    [
        ({}, _obs([[1, "x"], [2, "y"]]), _obs([[2, "y"], [1, "x"]]), True),
        ({"ordered": True}, _obs([[1, "x"], [2, "y"]]), _obs([[2, "y"], [1, "x"]]), False),
        ({}, _obs([[1, "x"]]), _obs([[1, "x"], [1, "x"]]), False),
        ({"multiset": False}, _obs([[1, "x"]]), _obs([[1, "x"], [1, "x"]]), True),
        ({"float_tol": 0.01}, _obs([[1.0, "x"]]), _obs([[1.001, "x"]]), True),
        ({"float_tol": 1e-9}, _obs([[1.0, "x"]]), _obs([[1.001, "x"]]), False),
        ({}, _obs([[1, "x"]]), _obs([[1, "x"]], ("c", "d")), True),
        ({"column_names": True}, _obs([[1, "x"]]), _obs([[1, "x"]], ("c", "d")), False),
        ({}, Observation(False, "runtime"), Observation(False, "runtime"), True),
        ({}, Observation(False, "runtime"), Observation(False, "timeout"), False),
        ({}, _obs([]), Observation(False, "runtime"), False),
    ],
)
def test_agree_follows_the_compare_settings(
    compare: dict[str, Any], a: Observation, b: Observation, agree: bool
) -> None:
    task = _task("SELECT 1", **compare)
    assert SqlDiffer().agree(task, a, b) is agree
    assert SqlDiffer().agree(task, b, a) is agree
