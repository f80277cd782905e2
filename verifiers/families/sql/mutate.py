"""SQL mutants built on DuckDB's own parse tree (``json_serialize_sql``), never on the text.

The reference query is serialised to DuckDB's JSON AST, one node is changed, and the tree is
turned back into SQL with ``json_deserialize_sql``. Operators (stable names):

- ``sql.compare_flip``: ``=`` <-> ``<>``, ``<`` <-> ``<=``, ``>`` <-> ``>=``;
- ``sql.logic_flip``: ``AND`` <-> ``OR``;
- ``sql.join_kind``: ``INNER`` -> ``LEFT``, ``LEFT``/``RIGHT``/``FULL`` -> ``INNER``;
- ``sql.aggregate_swap``: one of ``count sum avg min max`` (one argument) -> another;
- ``sql.distinct``: ``SELECT DISTINCT`` added or dropped, ``agg(DISTINCT x)`` toggled;
- ``sql.order_flip`` / ``sql.order_drop``: one ORDER BY key's direction flipped; the whole
  ORDER BY dropped;
- ``sql.limit``: LIMIT n -> n - 1, n + 1, or dropped;
- ``sql.constant``: an integer literal in WHERE / HAVING / ON off by one.

Parsing happens in this process with an in-memory DuckDB that never touches a table: only the
parser and serialiser run. It does NOT guard against: statements DuckDB cannot serialise (only
SELECT-type queries; anything else gives no mutants), or equivalent mutants (the detector
tells those apart by running them).
"""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

COMPARE_FLIPS = {
    "COMPARE_EQUAL": "COMPARE_NOTEQUAL",
    "COMPARE_NOTEQUAL": "COMPARE_EQUAL",
    "COMPARE_LESSTHAN": "COMPARE_LESSTHANOREQUALTO",
    "COMPARE_LESSTHANOREQUALTO": "COMPARE_LESSTHAN",
    "COMPARE_GREATERTHAN": "COMPARE_GREATERTHANOREQUALTO",
    "COMPARE_GREATERTHANOREQUALTO": "COMPARE_GREATERTHAN",
}
_SYMBOL = {
    "COMPARE_EQUAL": "=",
    "COMPARE_NOTEQUAL": "<>",
    "COMPARE_LESSTHAN": "<",
    "COMPARE_LESSTHANOREQUALTO": "<=",
    "COMPARE_GREATERTHAN": ">",
    "COMPARE_GREATERTHANOREQUALTO": ">=",
}
LOGIC_FLIPS = {"CONJUNCTION_AND": "CONJUNCTION_OR", "CONJUNCTION_OR": "CONJUNCTION_AND"}
JOIN_FLIPS = {"INNER": "LEFT", "LEFT": "INNER", "RIGHT": "INNER", "OUTER": "INNER"}
AGGREGATES = ("count", "sum", "avg", "min", "max")
_CLAUSES = {
    "select_list": "SELECT",
    "where_clause": "WHERE",
    "having": "HAVING",
    "condition": "ON",
    "group_expressions": "GROUP BY",
    "from_table": "FROM",
    "qualify": "QUALIFY",
    "cte_map": "WITH",
}
_PREDICATE_CLAUSES = frozenset(("WHERE", "HAVING", "ON", "QUALIFY"))
Path = tuple[str | int, ...]


@dataclass(frozen=True)
class Edit:
    """One change to the tree: set the value at ``path`` (a chain of keys and indices)."""

    operator: str
    where: str
    path: Path
    value: Any


class SqlParseError(ValueError):
    """DuckDB could not serialise the query (a syntax error or not a SELECT)."""


_LOCK = threading.Lock()
_CON: Any = None


def _con() -> Any:
    global _CON
    if _CON is None:
        import duckdb

        _CON = duckdb.connect(":memory:", config={"enable_external_access": False})
    return _CON


def parse(query: str) -> dict[str, Any]:
    """DuckDB's JSON parse tree of ``query``; raises SqlParseError."""
    with _LOCK:
        raw = _con().execute("SELECT json_serialize_sql(?::VARCHAR)", [query]).fetchone()[0]
    tree = json.loads(raw)
    if tree.get("error") or len(tree.get("statements") or []) != 1:
        raise SqlParseError(str(tree.get("error_message") or "expected exactly one statement"))
    return dict(tree)


def unparse(tree: dict[str, Any]) -> str:
    """SQL text for a parse tree (DuckDB's own rendering)."""
    with _LOCK:
        row = _con().execute("SELECT json_deserialize_sql(?::JSON)", [json.dumps(tree)]).fetchone()
    return str(row[0])


def normalise(query: str) -> str:
    """The query as DuckDB renders its own parse tree (mutants are compared with this)."""
    return unparse(parse(query))


def _clause(path: Path, default: str) -> str:
    for key in reversed(path):
        if isinstance(key, str) and key in _CLAUSES:
            return _CLAUSES[key]
    return default


def _walk(node: Any, path: Path) -> Iterator[tuple[Path, dict[str, Any]]]:
    if isinstance(node, dict):
        yield path, node
        for k, v in node.items():
            yield from _walk(v, (*path, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _walk(v, (*path, i))


def _int_literal(node: dict[str, Any]) -> int | None:
    lit = node.get("literal")
    if node.get("class") != "CONSTANT" or not isinstance(lit, dict):
        return None
    if lit.get("kind") != "INTEGER":
        return None
    try:
        return int(str(lit.get("text")))
    except ValueError:
        return None


def _with_literal(node: dict[str, Any], value: int) -> dict[str, Any]:
    out = copy.deepcopy(node)
    out["literal"] = {**out["literal"], "text": str(value)}
    return out


def _modifier_edits(path: Path, node: dict[str, Any]) -> Iterator[Edit]:
    """DISTINCT, ORDER BY and LIMIT edits of one query node's modifier list."""
    mods: list[dict[str, Any]] = list(node.get("modifiers") or [])
    mpath = (*path, "modifiers")
    kinds = [m.get("type") for m in mods]
    if node.get("type") == "SELECT_NODE":
        if "DISTINCT_MODIFIER" in kinds:
            kept = [m for m in mods if m.get("type") != "DISTINCT_MODIFIER"]
            yield Edit("sql.distinct", "SELECT DISTINCT dropped", mpath, kept)
        else:
            added = [{"type": "DISTINCT_MODIFIER", "distinct_on_targets": []}, *mods]
            yield Edit("sql.distinct", "SELECT DISTINCT added", mpath, added)
    for i, m in enumerate(mods):
        if m.get("type") == "ORDER_MODIFIER" and m.get("orders"):
            for j, order in enumerate(m["orders"]):
                new = "ASCENDING" if order.get("type") == "DESCENDING" else "DESCENDING"
                where = f"ORDER BY key {j + 1} -> {new[:4] if new == 'DESCENDING' else 'ASC'}"
                yield Edit("sql.order_flip", where, (*mpath, i, "orders", j, "type"), new)
            yield Edit("sql.order_drop", "ORDER BY dropped", mpath, mods[:i] + mods[i + 1 :])
        if m.get("type") == "LIMIT_MODIFIER" and isinstance(m.get("limit"), dict):
            n = _int_literal(m["limit"])
            if n is not None:
                for v in (n - 1, n + 1):
                    if v >= 0:
                        lim = _with_literal(m["limit"], v)
                        yield Edit("sql.limit", f"LIMIT {n} -> {v}", (*mpath, i, "limit"), lim)
            if m.get("offset") is None:
                yield Edit("sql.limit", "LIMIT dropped", mpath, mods[:i] + mods[i + 1 :])


def edits(tree: dict[str, Any]) -> list[Edit]:
    """Every single-node edit of a parse tree, in tree order (see the module docstring)."""
    out: list[Edit] = []
    for path, node in _walk(tree, ()):
        kind, cls = node.get("type"), node.get("class")
        clause = _clause(path, "query")
        if cls == "COMPARISON" and kind in COMPARE_FLIPS:
            new = COMPARE_FLIPS[kind]
            where = f"{clause}: {_SYMBOL[kind]} -> {_SYMBOL[new]}"
            out.append(Edit("sql.compare_flip", where, (*path, "type"), new))
        elif cls == "CONJUNCTION" and kind in LOGIC_FLIPS:
            new = LOGIC_FLIPS[kind]
            where = f"{clause}: {kind[12:]} -> {new[12:]}"
            out.append(Edit("sql.logic_flip", where, (*path, "type"), new))
        elif kind == "JOIN" and node.get("join_type") in JOIN_FLIPS:
            if node.get("condition") is None and not node.get("using_columns"):
                continue  # a cross join written as a join: kinds mean nothing
            old, new = node["join_type"], JOIN_FLIPS[node["join_type"]]
            out.append(Edit("sql.join_kind", f"JOIN: {old} -> {new}", (*path, "join_type"), new))
        elif cls == "FUNCTION" and node.get("function_name") in AGGREGATES:
            name = node["function_name"]
            if len(node.get("arguments") or []) == 1:
                for other in AGGREGATES:
                    if other != name:
                        swapped = copy.deepcopy(node)
                        swapped["function_name"] = other
                        if isinstance(swapped.get("qualified_name"), dict):
                            swapped["qualified_name"] = {"path": [other]}
                        where = f"{clause}: {name}() -> {other}()"
                        out.append(Edit("sql.aggregate_swap", where, path, swapped))
                flag = not node.get("distinct")
                where = f"{clause}: {name}({'DISTINCT ' if flag else ''}...)"
                out.append(Edit("sql.distinct", where, (*path, "distinct"), flag))
        elif clause in _PREDICATE_CLAUSES and (n := _int_literal(node)) is not None:
            for v in (n - 1, n + 1):
                where = f"{clause}: constant {n} -> {v}"
                out.append(Edit("sql.constant", where, path, _with_literal(node, v)))
        if kind in ("SELECT_NODE", "SET_OPERATION_NODE"):
            out.extend(_modifier_edits(path, node))
    return out


def apply(tree: dict[str, Any], edit: Edit) -> dict[str, Any]:
    """A copy of ``tree`` with ``edit`` applied."""
    out = copy.deepcopy(tree)
    target: Any = out
    for key in edit.path[:-1]:
        target = target[key]
    if not edit.path:
        return dict(copy.deepcopy(edit.value))
    target[edit.path[-1]] = copy.deepcopy(edit.value)
    return out
