"""The SQL worker: runs inside the sandbox, holds DuckDB warm, answers one JSON line per request.

Started by the SQL verifier with the DuckDB extension module (``_duckdb``) shipped beside it
under ``lib/``; it imports nothing outside the standard library and ``_duckdb``. For a new
setup it opens an in-memory database (memory limit and threads set at open), writes the task's
files into a private directory and runs the setup there (files readable), optionally perturbs
the tables, then locks the engine (no spilling, no extension autoloading,
``enable_external_access=false``, ``lock_configuration=true``) and deletes the files. Locked
databases are reused for later requests with the same setup (``DatabaseCache``). Only a single
SELECT-type statement (per DuckDB's own parser) is run; a timer thread calls
``interrupt()`` at the time limit. Before the query it prints ``{"phase": "query"}`` so the
parent can tell a hang or crash in the setup (the task's) from one in the query.

It only emits plain data: column names, type names and rows with type tags (see ``encode``);
no verdict is computed here. It does NOT guard against: engine code that ignores
``interrupt()`` (e.g. one huge ``repeat()``; the parent's wall clock kills the process) or
allocations DuckDB does not account for (the sandbox's address-space limit stops those);
setup SQL is trusted task data and runs with file access inside the sandbox scratch.
"""

from __future__ import annotations

import contextlib
import datetime
import decimal
import hashlib
import json
import math
import os
import resource
import shutil
import sys
import tempfile
import threading
import uuid
from typing import Any

# Third-party modules this guest may import inside the sandbox: DuckDB's extension module,
# copied beside the worker by the host; the test of the layout reads this.
GUEST_REQUIRES = ("_duckdb",)

LOCK_SETTINGS = (  # order matters: temp_directory cannot change once file access is off
    "SET temp_directory = ''",
    "SET autoinstall_known_extensions = false",
    "SET autoload_known_extensions = false",
    "SET enable_external_access = false",
)
_INT_TYPES = frozenset(
    (
        "TINYINT",
        "SMALLINT",
        "INTEGER",
        "BIGINT",
        "HUGEINT",
        "UTINYINT",
        "USMALLINT",
        "UINTEGER",
        "UBIGINT",
        "UHUGEINT",
    )
)
_FLOAT_TYPES = frozenset(("FLOAT", "DOUBLE", "REAL"))
_TEXT_TYPES = frozenset(("VARCHAR",))


# ---------------------------------------------------------------------- value encoding
def encode(v: Any) -> Any:
    """A JSON-safe form of one DuckDB value: natives as-is, others as ``{"$": tag, "v": ...}``."""
    if v is None or isinstance(v, bool | int | str):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else {"$": "float", "v": repr(v)}
    if isinstance(v, decimal.Decimal):
        return {"$": "decimal", "v": str(v)}
    if isinstance(v, datetime.datetime):
        return {"$": "timestamp", "v": str(v)}
    if isinstance(v, datetime.date):
        return {"$": "date", "v": v.isoformat()}
    if isinstance(v, datetime.time):
        return {"$": "time", "v": str(v)}
    if isinstance(v, datetime.timedelta):
        return {"$": "interval", "v": v.total_seconds()}
    if isinstance(v, bytes | bytearray | memoryview):
        return {"$": "blob", "v": bytes(v).hex()}
    if isinstance(v, uuid.UUID):
        return {"$": "uuid", "v": str(v)}
    if isinstance(v, list | tuple):
        return {"$": "list", "v": [encode(x) for x in v]}
    if isinstance(v, dict):
        return {"$": "struct", "v": [[encode(k), encode(x)] for k, x in v.items()]}
    return {"$": "text", "v": str(v)}


# ---------------------------------------------------------------------- perturbation
def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def perturb_statements(
    table: str, columns: list[tuple[str, str]], keys: set[str], fks: set[str], seed: int, n: int
) -> list[str]:
    """SQL that perturbs one table deterministically: copies of about half its rows, fresh keys.

    Seed 1 copies rows unchanged except key columns (counts and sums change, categories and
    joins stay); seed 2 also shifts numeric and date values of the copies and of some
    original rows; seed 3 and up also suffix non-key text in every other copy.
    Foreign-key columns are never changed.
    """
    t, rn = _q(table), '"__tasksieve_rn"'
    exprs: list[str] = []
    for name, typ in columns:
        c = _q(name)
        base = typ.split("(")[0]
        if name in keys and name not in fks:
            if base in _INT_TYPES:
                exprs.append(f"CAST((SELECT coalesce(max({c}), 0) FROM {t}) + {rn} AS {typ})")
            elif base in _TEXT_TYPES:
                exprs.append(f"{c} || '~p{seed}_' || {rn}")
            else:
                return []  # a key we cannot refresh: leave the table alone
        elif name in fks or seed < 2:
            exprs.append(c)
        elif base in _INT_TYPES:
            exprs.append(f"CAST({c} + 1 + {rn} % 3 AS {typ})")
        elif base in _FLOAT_TYPES or base == "DECIMAL":
            exprs.append(f"CAST({c} + 1.25 * (1 + {rn} % 2) AS {typ})")
        elif base in ("DATE", "TIMESTAMP"):
            exprs.append(f"CAST({c} + INTERVAL (1 + {rn} % 5) DAY AS {typ})")
        elif base in _TEXT_TYPES and seed >= 3:
            exprs.append(f"CASE WHEN {rn} % 2 = 0 THEN {c} || '~{seed}' ELSE {c} END")
        else:
            exprs.append(c)
    k = max(1, (n + 1) // 2)
    pick = f"SELECT *, row_number() OVER (ORDER BY hash(rowid, {seed})) AS {rn} FROM {t}"
    out = [f"INSERT INTO {t} SELECT {', '.join(exprs)} FROM ({pick}) WHERE {rn} <= {k}"]
    if seed >= 2:
        sets = [
            f"{_q(name)} = CAST({_q(name)} + 2 AS {typ})"
            for name, typ in columns
            if name not in keys | fks and typ.split("(")[0] in _INT_TYPES | _FLOAT_TYPES
        ]
        if sets:
            where = f"hash(rowid, {seed + 7}) % 3 = 0 AND rowid < {n}"
            out.append(f"UPDATE {t} SET {', '.join(sets)} WHERE {where}")
    return out


def perturb(con: Any, seed: int) -> list[str]:
    """Perturb every user table (see ``perturb_statements``); returns tables left unchanged."""
    tables = con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE NOT internal AND NOT temporary "
        "AND database_name = current_database() ORDER BY schema_name, table_name"
    ).fetchall()
    skipped: list[str] = []
    for (table,) in tables:
        cols = con.execute(
            "SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = ? "
            "AND database_name = current_database() ORDER BY column_index",
            [table],
        ).fetchall()
        keys: set[str] = set()
        fks: set[str] = set()
        for ctype, names in con.execute(
            "SELECT constraint_type, constraint_column_names FROM duckdb_constraints() "
            "WHERE table_name = ? AND database_name = current_database()",
            [table],
        ).fetchall():
            if ctype in ("PRIMARY KEY", "UNIQUE"):
                keys.update(names)
            elif ctype == "FOREIGN KEY":
                fks.update(names)
        n = con.execute(f"SELECT count(*) FROM {_q(table)}").fetchall()[0][0]
        done = False
        for s in (seed, 1) if n else ():
            stmts = perturb_statements(table, cols, keys, fks, s, n)
            if not stmts:
                break
            con.execute("BEGIN TRANSACTION")
            try:
                for sql in stmts:
                    con.execute(sql)
                con.execute("COMMIT")
                done = True
                break
            except Exception:
                con.execute("ROLLBACK")
        if not done:
            skipped.append(table)
    return skipped


# ---------------------------------------------------------------------- one request
def _error_kind(exc: BaseException) -> str:
    name = type(exc).__name__
    if name == "ParserException":
        return "syntax"
    if name == "InterruptException":
        return "timeout"
    if name == "OutOfMemoryException" or isinstance(exc, MemoryError):
        return "memory"
    return "runtime"


def _fail(stage: str, kind: str, msg: str) -> dict[str, Any]:
    return {"ok": False, "stage": stage, "kind": kind, "error": msg[:2000]}


def _write_files(root: str, files: dict[str, str]) -> None:
    for name, text in files.items():
        parts = name.split("/")
        if not name or name.startswith("/") or any(p in ("", ".", "..") for p in parts):
            raise ValueError(f"bad file name {name!r}")
        path = os.path.join(root, *parts)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)


def _timed(con: Any, seconds: float) -> threading.Timer:
    timer = threading.Timer(seconds, con.interrupt)
    timer.daemon = True
    timer.start()
    return timer


def run_query(con: Any, duck: Any, req: dict[str, Any]) -> dict[str, Any]:
    """Parse, check and run the request's query on a locked connection; rows or an error."""
    sql = str(req["query"])
    try:
        stmts = duck.extract_statements(sql)
    except Exception as e:
        return _fail("parse", _error_kind(e), str(e))
    if len(stmts) != 1:
        return _fail("parse", "statements", f"expected one SQL statement, got {len(stmts)}")
    if stmts[0].type != duck.StatementType.SELECT:
        kind = str(stmts[0].type).rsplit(".", 1)[-1]
        return _fail("parse", "not_select", f"only a SELECT/WITH query is accepted, got {kind}")
    max_rows, max_bytes = int(req["max_rows"]), int(req["max_bytes"])
    timer = _timed(con, float(req["timeout_s"]))
    con.execute("BEGIN TRANSACTION")
    try:
        cur = con.execute(stmts[0])
        desc = cur.description or []
        raw = cur.fetchmany(max_rows + 1)
    except BaseException as e:
        return _fail("query", _error_kind(e), str(e))
    finally:
        timer.cancel()
        with contextlib.suppress(Exception):
            con.execute("ROLLBACK")
    if len(raw) > max_rows:
        return _fail("query", "too_large", f"result has more than {max_rows} rows")
    rows = [[encode(v) for v in r] for r in raw]
    out = {
        "ok": True,
        "columns": [str(d[0]) for d in desc],
        "types": [str(d[1]) for d in desc],
        "rows": rows,
    }
    if len(json.dumps(rows)) > max_bytes:
        return _fail("query", "too_large", f"result is larger than {max_bytes} bytes")
    return out


def build(duck: Any, req: dict[str, Any]) -> tuple[Any, list[str]]:
    """A fresh locked database for the request: files, setup, perturbation, then the lock."""
    home = os.getcwd()
    work = tempfile.mkdtemp(prefix="task-", dir=home)
    cfg = {
        "threads": int(req["threads"]),
        "async_threads": 0,  # 8 idle I/O threads per database otherwise
        "memory_limit": f"{int(req['memory_mb'])}MB",
    }
    con = duck.connect(":memory:", config=cfg)
    timer = _timed(con, float(req["timeout_s"]))
    try:
        _write_files(work, dict(req.get("files") or {}))
        os.chdir(work)
        con.execute(str(req["setup_sql"]))
        seed = int(req.get("seed") or 0)
        skipped = perturb(con, seed) if seed else []
        for s in LOCK_SETTINGS:
            con.execute(s)
        con.execute("SET lock_configuration = true")
        return con, skipped
    except BaseException:
        con.close()
        raise
    finally:
        timer.cancel()
        os.chdir(home)
        shutil.rmtree(work, ignore_errors=True)


class DatabaseCache:
    """Locked databases kept for later requests with the same setup (LRU, at most ``size``).

    Old ones are closed while the address space exceeds half of RLIMIT_AS.

    A database with sequences is never kept (``nextval`` in a SELECT changes it for good);
    queries run in a transaction that is rolled back, so nothing else a SELECT does stays.
    """

    def __init__(self, size: int = 16) -> None:
        self.size = size
        self.dbs: dict[str, tuple[Any, list[str]]] = {}

    @staticmethod
    def key(req: dict[str, Any]) -> str:
        """What makes two requests' databases the same."""
        parts = [req["setup_sql"], req.get("files") or {}, req.get("seed") or 0]
        raw = json.dumps([*parts, req["memory_mb"], req["threads"]], sort_keys=True)
        return hashlib.sha256(raw.encode()).hexdigest()

    def take(self, key: str) -> tuple[Any, list[str]] | None:
        """The cached database for ``key`` (removed from the cache while in use)."""
        return self.dbs.pop(key, None)

    def give(self, key: str, con: Any, skipped: list[str]) -> None:
        """Keep ``con`` for reuse if it has no sequences; close what falls out."""
        n = con.execute("SELECT count(*) FROM duckdb_sequences()").fetchall()[0][0]
        if n or self.size <= 0:
            con.close()
            return
        self.dbs[key] = (con, skipped)
        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        budget = soft // 2 if soft > 0 else 1 << 62
        while self.dbs and (len(self.dbs) > self.size or _vm_bytes() > budget):
            old = next(iter(self.dbs))
            self.dbs.pop(old)[0].close()


def _vm_bytes() -> int:
    """This process's address-space size (what RLIMIT_AS limits)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as fh:
            return int(fh.read().split()[0]) * resource.getpagesize()
    except (OSError, ValueError, IndexError):
        return 0


def handle(duck: Any, req: dict[str, Any], emit: Any, cache: DatabaseCache) -> dict[str, Any]:
    """One request: a (cached or fresh) locked database, then the query."""
    key = cache.key(req)
    hit = cache.take(key)
    if hit is None:
        try:
            hit = build(duck, req)
        except BaseException as e:
            return _fail("setup", _error_kind(e), str(e))
    con, skipped = hit
    emit({"phase": "query", "skipped": skipped})
    reply: dict[str, Any] = _fail("query", "internal", "no reply")
    try:
        reply = run_query(con, duck, req)
    finally:
        if reply.get("kind") in ("timeout", "memory", "internal"):
            con.close()
        else:
            cache.give(key, con, skipped)
    return reply


def main() -> None:
    """Serve requests from stdin, one JSON object per line, until stdin closes."""
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(here, "lib"))
    import _duckdb as duck

    out = sys.stdout

    def emit(obj: dict[str, Any]) -> None:
        out.write(json.dumps(obj) + "\n")
        out.flush()

    use = resource.getrusage(resource.RUSAGE_SELF)  # the start is no request's work
    version = str(getattr(duck, "__version__", "?"))
    emit({"ready": True, "version": version, "cpu_s": use.ru_utime + use.ru_stime})
    cache = DatabaseCache()
    for line in sys.stdin:
        try:
            reply = handle(duck, json.loads(line), emit, cache)
        except Exception as e:  # a bad request is the parent's bug, never the query's
            reply = _fail("worker", "internal", f"{type(e).__name__}: {e}")
        use = resource.getrusage(resource.RUSAGE_SELF)
        reply["cpu_s"] = use.ru_utime + use.ru_stime
        emit(reply)


if __name__ == "__main__":
    main()
