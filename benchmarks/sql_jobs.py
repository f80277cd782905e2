"""The SQL benchmark's workload: many distinct questions derived from the example SQL tasks.

Each example task in ``examples/tasks/sql.jsonl`` is a template: its tables stay, and its
question is varied (literals, predicates, aggregates, projections, ordering, limits), giving
distinct reference queries. Every question gets five candidates with an intended verdict:
two right rewrites (``pass``), a wrong query (``fail``: off-by-one, reversed order, an
extra row or column...), a query that breaks (``error``: syntax or unknown column) and the
reference wrapped with an extra column (``fail``). The wrong variants were chosen so that each
changes the result on the task's data; every run checks that again, since every setup's
verdicts are compared with the intended ones.

``salt`` gives each question's setup SQL a distinct trailing comment per pass, so a new
pass looks like new tasks to every cache keyed on the setup or reference (as a stream of
distinct tasks would), while results stay the same.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

from tasksieve.schemas import SqlSpec, TaskRecord

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "tasks" / "sql.jsonl"
Question = tuple[str, list[str], list[str], list[str]]  # reference, rights, wrongs, errors


@dataclass(frozen=True)
class SqlJob:
    """One verification: a task, a candidate query and the verdict status it must get."""

    task: TaskRecord
    candidate: str
    expect: str  # pass, fail or error

    @property
    def spec(self) -> SqlSpec:
        """The task's SQL spec."""
        assert isinstance(self.task.verifier, SqlSpec)
        return self.task.verifier


def _count(s: str, x: int) -> Question:
    where = f"status = '{s}' AND amount > {x}"
    ref = f"SELECT count(*) AS n FROM orders WHERE {where}"
    rights = [
        f"SELECT count(*) FILTER (WHERE {where}) AS n FROM orders",
        f"SELECT count(id) AS n FROM orders WHERE amount > {x} AND status = '{s}'",
    ]
    return ref, rights, [f"SELECT count(*) + 1 AS n FROM orders WHERE {where}"], []


def _city(cities: list[str], desc: bool) -> Question:
    d = " DESC" if desc else ""
    listed = ", ".join(f"'{c}'" for c in cities)
    ref = f"SELECT name FROM customers WHERE city IN ({listed}) ORDER BY name{d}"
    ors = " OR ".join(f"c.city = '{c}'" for c in cities)
    rights = [
        f"SELECT c.name FROM customers AS c WHERE {ors} ORDER BY 1{d}",
        f"SELECT name FROM customers WHERE list_contains([{listed}], city) ORDER BY name{d}",
    ]
    flip = "" if desc else " DESC"
    wrongs = [f"SELECT name FROM customers WHERE city IN ({listed}) ORDER BY name{flip}"]
    return ref, rights, wrongs, []


def _revenue(agg: str, m: float) -> Question:
    ref = (
        f"SELECT c.name, {agg}(o.amount) AS total FROM customers c JOIN orders o "
        f"ON o.customer_id = c.id WHERE o.amount >= {m} GROUP BY c.name "
        "ORDER BY total DESC, c.name"
    )
    rights = [
        f"WITH t AS (SELECT customer_id, {agg}(amount) AS total FROM orders "
        f"WHERE amount >= {m} GROUP BY customer_id) SELECT c.name, t.total FROM t "
        "JOIN customers c ON c.id = t.customer_id ORDER BY t.total DESC, c.name",
        f"SELECT name, total FROM (SELECT c.name, {agg}(o.amount) AS total FROM orders o, "
        f"customers c WHERE o.customer_id = c.id AND o.amount >= {m} GROUP BY ALL) "
        "ORDER BY total DESC, name",
    ]
    wrongs = [  # a customer without orders must not appear
        f"SELECT c.name, {agg}(o.amount) AS total FROM customers c LEFT JOIN orders o "
        f"ON o.customer_id = c.id AND o.amount >= {m} GROUP BY c.name "
        "ORDER BY total DESC NULLS LAST, c.name"
    ]
    return ref, rights, wrongs, [ref.replace("SELECT", "SELEC", 1)]


def _monthly(agg: str, region: str) -> Question:
    where = "year(sale_date) = 2024" + (f" AND region = '{region}'" if region else "")
    ref = (
        f"SELECT CAST(date_trunc('month', sale_date) AS DATE) AS month, {agg}(amount) AS total "
        f"FROM sales WHERE {where} GROUP BY month ORDER BY month"
    )
    span = "sale_date >= DATE '2024-01-01' AND sale_date < DATE '2025-01-01'"
    span += f" AND region = '{region}'" if region else ""
    rights = [
        f"SELECT date_trunc('month', sale_date)::DATE AS month, {agg}(amount) AS total "
        f"FROM sales WHERE {span} GROUP BY 1 ORDER BY 1",
        f"SELECT month, {agg}(amount) AS total FROM (SELECT CAST(date_trunc('month', "
        f"sale_date) AS DATE) AS month, amount FROM sales WHERE {where}) GROUP BY month "
        "ORDER BY month",
    ]
    wrongs = [ref.replace("ORDER BY month", "ORDER BY month DESC")]
    return ref, rights, wrongs, [ref.replace("(amount)", "(amont)")]


def _top(k: int, measure: str) -> Question:
    ranked = (
        f"WITH revenue AS (SELECT p.category, p.name, sum({measure}) AS revenue "
        "FROM products p JOIN sales s ON s.product_id = p.id GROUP BY p.category, p.name), "
        "ranked AS (SELECT *, row_number() OVER (PARTITION BY category "
        "ORDER BY revenue DESC, name) AS rank FROM revenue) "
        "SELECT category, name, revenue, rank FROM ranked WHERE rank {op} ORDER BY category, rank"
    )
    ref = ranked.replace("{op}", f"<= {k}")
    rights = [
        f"SELECT p.category, p.name, sum({measure}) AS revenue, row_number() OVER "
        f"(PARTITION BY p.category ORDER BY sum({measure}) DESC, p.name) AS rank "
        "FROM products p JOIN sales s ON s.product_id = p.id GROUP BY p.category, p.name "
        f"QUALIFY rank <= {k} ORDER BY category, rank",
        ranked.replace("{op}", f"< {k + 1}"),
    ]
    return ref, rights, [ranked.replace("{op}", f"<= {k + 1}")], []


def _streak(start: str, h: int) -> Question:
    body = (
        f"WITH days AS (SELECT DISTINCT user_id, login_date FROM logins "
        f"WHERE login_date >= DATE '{start}'), grouped AS (SELECT user_id, login_date, "
        "login_date - CAST(row_number() OVER (PARTITION BY user_id ORDER BY login_date) "
        "AS INTEGER) AS grp FROM days), runs AS (SELECT user_id, grp, count(*) AS len "
        "FROM grouped GROUP BY user_id, grp) "
    )
    ref = body + "SELECT user_id, max(len) AS longest_streak FROM runs GROUP BY user_id "
    ref += f"HAVING max(len) >= {h} ORDER BY user_id"
    rights = [
        body + "SELECT user_id, longest_streak FROM (SELECT user_id, max(len) AS "
        f"longest_streak FROM runs GROUP BY user_id) WHERE longest_streak >= {h} ORDER BY 1",
        body + "SELECT user_id, arg_max(len, len) AS longest_streak FROM runs GROUP BY "
        f"user_id HAVING max(len) >= {h} ORDER BY user_id",
    ]
    wrongs = [ref.replace(f">= {h}", f"> {h}")]  # off by one: loses users at exactly h
    return ref, rights, wrongs, [ref.replace("max(len)", "max(length)", 1)]


QUESTIONS = {
    "sql.count_shipped": [
        _count(s, x) for s in ("shipped", "pending", "cancelled") for x in (0, 6, 10, 15, 30, 50)
    ],
    "sql.customers_in_city": [
        _city(c, d)
        for c in (
            ["Lisbon"],
            ["Porto"],
            ["Lisbon", "Porto"],
            ["Lisbon", "Faro"],
            ["Porto", "Faro"],
            ["Lisbon", "Porto", "Faro"],
        )
        for d in (False, True)
    ],
    "sql.revenue_per_customer": [
        _revenue(a, m) for a in ("sum", "max", "min", "avg") for m in (0, 5, 13, 21)
    ],
    "sql.monthly_sales_csv": [
        _monthly(a, r) for a in ("sum", "count", "max") for r in ("", "north", "south")
    ],
    "sql.top2_per_category": [_top(k, m) for k in (1, 2, 3) for m in ("s.qty * s.price", "s.qty")],
    "sql.longest_login_streak": [
        _streak(d, h)  # h: where some user's longest streak is exactly h (see the wrong one)
        for d, hs in (("2024-01-01", (1, 3, 4)), ("2024-03-01", (1, 2, 3)))
        for h in hs
    ],
}


def templates() -> dict[str, TaskRecord]:
    """The example SQL tasks by id."""
    out = {}
    for line in EXAMPLES.read_text(encoding="utf-8").splitlines():
        if line.strip():
            t = TaskRecord.model_validate_json(line)
            out[t.id] = t
    return out


def questions() -> list[tuple[TaskRecord, Question]]:
    """Every (template task, question) pair, in a fixed order."""
    base = templates()
    return [(base[tid], q) for tid, qs in QUESTIONS.items() for q in qs]


def jobs(n: int = 0, salt: str = "", grouped: bool = False) -> list[SqlJob]:
    """Five verifications for each of the first ``n`` questions (0: all), shuffled (fixed seed).

    ``salt`` is appended to every setup as a comment (see the module docstring). ``grouped``
    keeps each question's five candidates together (questions still shuffled), as when a
    task's samples are verified one after another.
    """
    out: list[list[SqlJob]] = []
    for k, (base, (ref, rights, wrongs, errors)) in enumerate(questions()[: n or None]):
        spec = base.verifier
        assert isinstance(spec, SqlSpec)
        setup = spec.setup_sql + (f"\n-- question {k} {salt}\n" if salt else "")
        fields = {"setup_sql": setup, "reference_query": ref, "expected_rows": None}
        fields["expected_columns"] = None
        task = base.model_copy(
            update={
                "id": f"{base.id}.q{k}",
                "reference_solution": ref,
                "verifier": spec.model_copy(update=fields),
            }
        )
        bad = errors or [f"SELECT * FROM ({ref}) AS q WHERE nosuchcolumn > 0"]
        cands = [(c, "pass") for c in rights] + [(c, "fail") for c in wrongs]
        cands += [(f"SELECT *, 1 AS extra FROM ({ref}) AS q", "fail")]
        cands += [(c, "error") for c in bad[:1]]
        out.append([SqlJob(task, c, e) for c, e in cands[:5]])
    rng = random.Random(7)
    rng.shuffle(out)
    if grouped:
        return [j for group in out for j in group]
    flat = [j for group in out for j in group]
    rng.shuffle(flat)
    return flat


def distinct_references(work: list[SqlJob]) -> int:
    """How many distinct (setup, files, reference) keys the jobs hold: the cache misses."""
    keys = {json.dumps([j.spec.setup_sql, j.spec.files, j.spec.reference_query]) for j in work}
    return len(keys)
