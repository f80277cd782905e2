"""Extra setup SQL that varies a task's database: NULLs, duplicate rows, empty tables.

These complement the worker's own perturbation (``sql_worker.perturb``: copies of rows with
fresh keys, shifted numbers and dates, suffixed text). They are built here, on the host, from
the task's catalog as the sandboxed worker reports it (``CATALOG_QUERY`` and
``CONSTRAINTS_QUERY``, plain SELECTs run in a worker), and appended to the task's setup SQL, so
they run inside the sandbox like the setup itself:

- ``nulls``: every third row of every nullable column that is not a key or a foreign key set
  to NULL (each column its own offset, ``hash(salt, column)``, so a table of three or more
  rows always gets some);
- ``duplicates``: about half of the rows of every table without a primary or unique key
  inserted a second time;
- ``empty``: every table emptied (tables that reference others first);
- ``empty_one``: only the ``index``-th table (by name) that no other table references emptied.

A variation that has nothing to change (no nullable column, every table keyed) is the original
database again; one whose SQL fails makes every solution fail on it, so the detectors drop it
as invalid. It does NOT guard against: CHECK constraints the variation violates (the setup then
fails: an invalid probe), or views and macros over the tables (they see the varied rows).
"""

from __future__ import annotations

from dataclasses import dataclass, field

CATALOG_QUERY = (
    "SELECT c.table_name, c.column_name, c.is_nullable FROM duckdb_columns() c "
    "JOIN duckdb_tables() t ON t.table_oid = c.table_oid "
    "WHERE NOT t.internal AND NOT t.temporary AND c.database_name = current_database() "
    "ORDER BY c.table_name, c.column_index"
)
CONSTRAINTS_QUERY = (
    "SELECT table_name, constraint_type, constraint_column_names, referenced_table "
    "FROM duckdb_constraints() WHERE database_name = current_database()"
)
KINDS = ("nulls", "duplicates", "empty", "empty_one")


@dataclass
class Table:
    """One user table: its columns (name, nullable), keys, foreign keys and referenced tables."""

    name: str
    columns: list[tuple[str, bool]] = field(default_factory=list)
    keys: set[str] = field(default_factory=set)
    fks: set[str] = field(default_factory=set)
    references: set[str] = field(default_factory=set)


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _lit(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def catalog(
    columns: list[tuple[object, ...]], constraints: list[tuple[object, ...]]
) -> list[Table]:
    """Tables from the rows of ``CATALOG_QUERY`` and ``CONSTRAINTS_QUERY``, sorted by name."""
    tables: dict[str, Table] = {}
    for row in columns:
        name, col, nullable = str(row[0]), str(row[1]), bool(row[2])
        tables.setdefault(name, Table(name)).columns.append((col, nullable))
    for row in constraints:
        name, kind = str(row[0]), str(row[1])
        names = row[2] if isinstance(row[2], list | tuple) else []
        t = tables.get(name)
        if t is None:
            continue
        if kind in ("PRIMARY KEY", "UNIQUE"):
            t.keys.update(str(n) for n in names)
        elif kind == "FOREIGN KEY":
            t.fks.update(str(n) for n in names)
            if row[3]:
                t.references.add(str(row[3]))
    return [tables[k] for k in sorted(tables)]


def _delete_order(tables: list[Table]) -> list[Table]:
    """Tables in an order that deletes referencing rows before the rows they reference."""
    left = {t.name: t for t in tables}
    out: list[Table] = []
    while left:
        referenced = {r for t in left.values() for r in t.references if r != t.name}
        free = [t for n, t in sorted(left.items()) if n not in referenced] or list(left.values())
        for t in free:
            out.append(left.pop(t.name))
    return out


def variation_sql(kind: str, tables: list[Table], salt: int, index: int = 0) -> str:
    """The statements for one variation (``KINDS``); empty when it changes nothing."""
    stmts: list[str] = []
    if kind == "nulls":
        for t in tables:
            for col, nullable in t.columns:
                if nullable and col not in t.keys | t.fks:
                    cond = f"(rowid + hash({salt}, {_lit(col)})) % 3 = 0"
                    stmts.append(f"UPDATE {_q(t.name)} SET {_q(col)} = NULL WHERE {cond}")
    elif kind == "duplicates":
        for t in tables:
            if not t.keys:
                pick = f"SELECT * FROM {_q(t.name)} WHERE hash(rowid, {salt}) % 2 = 0"
                stmts.append(f"INSERT INTO {_q(t.name)} {pick}")
    elif kind == "empty":
        stmts = [f"DELETE FROM {_q(t.name)}" for t in _delete_order(tables)]
    elif kind == "empty_one":
        referenced = {r for t in tables for r in t.references}
        leaves = [t for t in tables if t.name not in referenced]
        if index < len(leaves):
            stmts.append(f"DELETE FROM {_q(leaves[index].name)}")
    else:
        raise ValueError(f"unknown variation {kind!r}; choose one of {', '.join(KINDS)}")
    return ";\n".join(stmts)
