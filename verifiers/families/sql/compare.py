"""Comparing SQL results under a task's rules (plain functions; the verdict's core).

Values arrive either from the worker (JSON with ``{"$": tag, "v": ...}`` tags, see
``sql_worker.encode``) or from a task's ``expected_rows`` (plain JSON), and are normalised by
``decode``: DECIMAL becomes ``Decimal``; dates, timestamps, times, UUIDs and blobs become
``Tagged`` values that equal a plain string with the same text (``expected_rows`` cannot carry
types; a ``T`` between date and time is accepted); lists and structs become tuples.

Equality (``values_equal``): NULL equals NULL; booleans equal only booleans; two integers
compare exactly; any other pair of numbers (float, DECIMAL, integer) compares with
``math.isclose(rel_tol=abs_tol=float_tol)`` and NaN equals NaN; strings compare exactly.
Column types are NOT compared (an INTEGER 3 equals a DOUBLE 3.0, a DATE equals the string
'2024-01-01'); column names only with ``compare.column_names`` (case-insensitively, as SQL
identifiers are). Unordered comparison sorts both sides canonically and, if float tolerance
makes the sorted orders disagree, falls back to greedy matching (up to ``MATCH_LIMIT`` rows).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from tasksieve.schemas import SqlCompare

MATCH_LIMIT = 5000
_TEMPORAL = frozenset(("date", "timestamp", "time"))


@dataclass(frozen=True)
class Tagged:
    """A typed value carried as text (date, timestamp, time, uuid, blob, text)."""

    kind: str
    text: str

    def __repr__(self) -> str:
        return f"{self.kind.upper()} '{self.text}'"


@dataclass(frozen=True)
class Result:
    """A query result: column names (None when unknown) and normalised rows."""

    columns: list[str] | None
    rows: list[tuple[Any, ...]]


def decode(v: Any) -> Any:
    """The comparable form of one encoded (or plain JSON) value."""
    if isinstance(v, list):
        return tuple(decode(x) for x in v)
    if not isinstance(v, dict):
        return v
    tag, val = v.get("$"), v.get("v")
    items: list[Any] = val if isinstance(val, list) else []
    if tag is None:  # a plain JSON object in expected_rows: a struct
        return tuple(sorted(((str(k), decode(x)) for k, x in v.items()), key=lambda p: p[0]))
    if tag in ("list", "struct"):
        if tag == "list":
            return tuple(decode(x) for x in items)
        return tuple((decode(k), decode(x)) for k, x in items)
    if tag in ("float", "interval"):
        try:
            return float(val)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return Tagged("text", str(val))
    if tag == "decimal":
        try:
            return Decimal(str(val))
        except InvalidOperation:
            return Tagged("text", str(val))
    return Tagged(str(tag), str(val))


def decode_rows(rows: list[list[Any]]) -> list[tuple[Any, ...]]:
    """Decode every row of a result."""
    return [tuple(decode(v) for v in r) for r in rows]


def _is_num(v: Any) -> bool:
    return isinstance(v, int | float | Decimal) and not isinstance(v, bool)


def _text(v: Tagged | str) -> str:
    t = v.text if isinstance(v, Tagged) else v
    return t.replace("T", " ", 1) if len(t) > 10 and t[10] == "T" else t


def values_equal(a: Any, b: Any, tol: float) -> bool:
    """Whether two normalised values are equal under the rules in the module docstring."""
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if _is_num(a) and _is_num(b):
        if isinstance(a, int) and isinstance(b, int):
            return a == b
        fa, fb = float(a), float(b)
        if math.isnan(fa) or math.isnan(fb):
            return math.isnan(fa) and math.isnan(fb)
        return fa == fb or math.isclose(fa, fb, rel_tol=tol, abs_tol=tol)
    if isinstance(a, Tagged) and isinstance(b, Tagged):
        return a.kind == b.kind and _text(a) == _text(b)
    if isinstance(a, Tagged) or isinstance(b, Tagged):
        other = b if isinstance(a, Tagged) else a
        tagged = a if isinstance(a, Tagged) else b
        return isinstance(other, str) and _text(tagged) == _text(other)
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(values_equal(x, y, tol) for x, y in zip(a, b, strict=True))
    if isinstance(a, str) and isinstance(b, str):
        return a == b
    return False


def rows_equal(a: tuple[Any, ...], b: tuple[Any, ...], tol: float) -> bool:
    """Whether two rows have the same width and equal values."""
    return len(a) == len(b) and all(values_equal(x, y, tol) for x, y in zip(a, b, strict=True))


def sort_key(v: Any) -> tuple[Any, ...]:
    """A total order over normalised values (NULLs first, then booleans, numbers, text...)."""
    if v is None:
        return (0,)
    if isinstance(v, bool):
        return (1, int(v))
    if _is_num(v):
        f = float(v)
        return (2, 1, 0.0) if math.isnan(f) else (2, 0, f)
    if isinstance(v, str | Tagged):
        return (3, _text(v))
    if isinstance(v, tuple):
        return (4, tuple(sort_key(x) for x in v))
    return (5, repr(v))


def _row_key(r: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(sort_key(v) for v in r)


def _dedupe(rows: list[tuple[Any, ...]], tol: float, ordered: bool) -> list[tuple[Any, ...]]:
    """Drop repeated rows (set semantics), keeping first occurrences."""
    if not ordered:
        out: list[tuple[Any, ...]] = []
        for r in sorted(rows, key=_row_key):
            if not out or not rows_equal(out[-1], r, tol):
                out.append(r)
        return out
    seen: list[tuple[Any, ...]] = []
    for r in rows:
        if not any(rows_equal(s, r, tol) for s in seen[-MATCH_LIMIT:]):
            seen.append(r)
    return seen


def _show(r: tuple[Any, ...]) -> str:
    s = repr(r)
    return s if len(s) <= 200 else s[:197] + "..."


def _unordered_diff(
    want: list[tuple[Any, ...]], got: list[tuple[Any, ...]], tol: float
) -> str | None:
    ws, gs = sorted(want, key=_row_key), sorted(got, key=_row_key)
    if all(rows_equal(w, g, tol) for w, g in zip(ws, gs, strict=True)):
        return None
    if len(ws) <= MATCH_LIMIT:
        left = list(gs)
        for w in ws:
            i = next((j for j, g in enumerate(left) if rows_equal(w, g, tol)), None)
            if i is None:
                return f"expected row {_show(w)} is missing"
            left.pop(i)
        return None
    w, g = next((w, g) for w, g in zip(ws, gs, strict=True) if not rows_equal(w, g, tol))
    return f"rows differ (sorted): expected {_show(w)}, got {_show(g)}"


def compare_results(want: Result, got: Result, rules: SqlCompare) -> str | None:
    """None if ``got`` matches ``want`` under ``rules``, else a short reason."""
    width = len(want.columns) if want.columns is not None else None
    if width is None and want.rows:
        width = len(want.rows[0])
    got_width = len(got.columns) if got.columns is not None else None
    if width is not None and got_width is not None and width != got_width:
        return f"expected {width} columns, got {got_width}"
    if (
        rules.column_names
        and want.columns is not None
        and got.columns is not None
        and [c.lower() for c in want.columns] != [c.lower() for c in got.columns]
    ):
        return f"column names differ: expected {want.columns}, got {got.columns}"
    tol = rules.float_tol
    w_rows, g_rows = want.rows, got.rows
    if not rules.multiset:
        w_rows = _dedupe(w_rows, tol, rules.ordered)
        g_rows = _dedupe(g_rows, tol, rules.ordered)
    if len(w_rows) != len(g_rows):
        return f"expected {len(w_rows)} rows, got {len(g_rows)}"
    if rules.ordered:
        for i, (w, g) in enumerate(zip(w_rows, g_rows, strict=True)):
            if not rows_equal(w, g, tol):
                return f"row {i + 1} differs: expected {_show(w)}, got {_show(g)}"
        return None
    return _unordered_diff(w_rows, g_rows, tol)
