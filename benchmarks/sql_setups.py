"""The SQL benchmark's setups: in-process DuckDB baselines and our sandboxed verifier.

Baselines run in the benchmark process with no isolation and their own, independent result
comparison (``same_result``), so verdict agreement also cross-checks ours:

- (a) a fresh ``duckdb.connect()`` per verification: setup SQL, reference, candidate, compare;
- (b) one warm connection per worker thread, reused: each distinct setup is built once into
  its own attached in-memory database and kept (like our workers' database cache), and every
  verification runs the reference and the candidate there (no reference cache).

Both use one DuckDB thread per connection, as our workers do. A task's data files are written
once per task into a temporary directory that DuckDB searches (``file_search_path``).
Candidates in the workload are SELECT queries; the baselines do not guard against others.
"""

from __future__ import annotations

import hashlib
import math
import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import duckdb

from benchmarks.sql_jobs import SqlJob
from tasksieve.schemas import SqlSpec

Rows = tuple[list[str], list[tuple[Any, ...]]]
_DB_CACHE = 16  # databases a warm connection keeps, as many as one of our workers does


def _close(a: Any, b: Any, tol: float) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None:
            return a is b
        return math.isclose(float(a), float(b), rel_tol=tol, abs_tol=tol)
    return bool(a == b)


def same_result(want: Rows, got: Rows, spec: SqlSpec) -> bool:
    """Same width, same rows (in order when the task says so), floats within tolerance."""
    (wc, wr), (gc, gr) = want, got
    if len(wc) != len(gc) or len(wr) != len(gr):
        return False
    if not spec.compare.ordered:
        wr, gr = sorted(wr, key=repr), sorted(gr, key=repr)
    tol = spec.compare.float_tol
    return all(
        len(w) == len(g) and all(_close(x, y, tol) for x, y in zip(w, g, strict=True))
        for w, g in zip(wr, gr, strict=True)
    )


def _rows(con: duckdb.DuckDBPyConnection, query: str) -> Rows:
    cur = con.execute(query)
    return [d[0] for d in cur.description or []], cur.fetchall()


def verdict(con: duckdb.DuckDBPyConnection, job: SqlJob) -> str:
    """Run the reference and the candidate on ``con``; pass, fail, error or infra_error."""
    spec = job.spec
    assert spec.reference_query is not None
    try:
        want = _rows(con, spec.reference_query)
    except duckdb.Error:
        return "infra_error"
    try:
        got = _rows(con, job.candidate)
    except duckdb.Error:
        return "error"
    return "pass" if same_result(want, got, spec) else "fail"


class DataFiles:
    """Each task's data files, written once into a directory of their own (untimed)."""

    def __init__(self, work: list[SqlJob], root: str) -> None:
        self.dirs: dict[str, str] = {}
        for j in work:
            if j.spec.files and j.task.id not in self.dirs:
                d = os.path.join(root, hashlib.sha256(j.task.id.encode()).hexdigest()[:16])
                os.makedirs(d, exist_ok=True)
                for name, text in j.spec.files.items():
                    with open(os.path.join(d, name), "w", encoding="utf-8") as fh:
                        fh.write(text)
                self.dirs[j.task.id] = d

    def search_path(self, job: SqlJob) -> str:
        """The statement that points DuckDB at the task's files (empty without files)."""
        d = self.dirs.get(job.task.id)
        return f"SET file_search_path = '{d}'" if d else ""


def fresh_connection(work: list[SqlJob], files: DataFiles) -> Callable[[int], str]:
    """(a) ``duckdb.connect()`` per verification: build the data, run both queries, compare."""

    def check(i: int) -> str:
        job = work[i]
        con = duckdb.connect(config={"threads": 1})
        try:
            if path := files.search_path(job):
                con.execute(path)
            con.execute(job.spec.setup_sql)
            return verdict(con, job)
        finally:
            con.close()

    return check


def warm_connection(work: list[SqlJob], files: DataFiles) -> Callable[[int], str]:
    """(b) one connection per thread, reused; databases kept per distinct setup (LRU)."""
    local = threading.local()

    def database(con: duckdb.DuckDBPyConnection, job: SqlJob) -> None:
        kept: OrderedDict[str, str] = local.kept
        key = hashlib.sha256(repr((job.spec.setup_sql, job.spec.files)).encode()).hexdigest()
        name = f"db_{key[:24]}"
        if key in kept:
            kept.move_to_end(key)
            con.execute(f"USE {name}")
            return
        con.execute(f"ATTACH ':memory:' AS {name}")
        con.execute(f"USE {name}")
        if path := files.search_path(job):
            con.execute(path)
        con.execute(job.spec.setup_sql)
        kept[key] = name
        while len(kept) > _DB_CACHE:
            _, old = kept.popitem(last=False)
            con.execute("USE memory")
            con.execute(f"DETACH {old}")
            con.execute(f"USE {name}")

    def check(i: int) -> str:
        if not hasattr(local, "con"):
            local.con = duckdb.connect(config={"threads": 1})
            local.kept = OrderedDict()
        database(local.con, work[i])
        return verdict(local.con, work[i])

    return check
