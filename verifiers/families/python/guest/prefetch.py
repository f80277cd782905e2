"""Which candidate calls a check makes first, known before it runs: sent in one message.

Runs inside the sandbox (standard library only; inlined into the harness by
``tasksieve.verifiers.sandbox.guest.bundle``). ``leading_calls`` reads ``check``'s top-level
statements in order and returns the candidate calls of the longest leading run of statements
whose calls are certain: the tests process sends them to the candidate in one message, and
the candidate answers them in order, one line each, while the statements run.

A statement extends the run only if running it is sure to make exactly its listed calls, in
order, and no other candidate call:

- it is ``pass``, a docstring or ``name = literal`` (it cannot reach the candidate), or
- it is ``assert TEST`` (no message) whose only names are one candidate call, by a
  candidate name, with literal arguments (``ast.literal_eval``), and builtins from ``pure``
  (builtins the tests' namespace does not redefine, which run no user code on the plain
  values a candidate returns), called without keywords; no attribute, subscript or lambda;
  and nothing evaluated before the candidate call can raise (only literals and ``pure``
  names come before it), so the call is made. With no trusted object in the statement, no
  operator or comparison in it can run trusted code that might call the candidate by name.

The first statement that fails this ends the run: calls after it are made one at a time, as
before, so the candidate sees exactly the calls, in exactly the order, of a run without
this. A statement is run once (``check``'s top level has no loop around it).
"""

from __future__ import annotations

import ast
from typing import Any

PURE = ("abs", "len", "round", "sorted", "set", "list", "tuple", "str", "int", "float",
        "bool", "min", "max", "sum", "isinstance", "type", "dict", "frozenset")  # fmt: skip


def _literal(node: ast.expr) -> tuple[bool, Any]:
    try:
        return True, ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None


def _order(node: ast.AST) -> list[ast.AST]:
    """Nodes in the order CPython evaluates them (children before their call or operator)."""
    out: list[ast.AST] = []
    for child in ast.iter_child_nodes(node):
        out += _order(child)
    out.append(node)
    return out


def _one_call(
    test: ast.expr, cands: dict[str, str], pure: set[str]
) -> tuple[str, list[Any], dict[str, Any]] | None:
    calls = [n for n in ast.walk(test) if isinstance(n, ast.Call)]
    mine = [c for c in calls if isinstance(c.func, ast.Name) and c.func.id in cands]
    if len(mine) != 1 or not isinstance(mine[0].func, ast.Name):
        return None
    call, name = mine[0], mine[0].func.id
    for n in ast.walk(test):  # only pure builtins and the candidate, once, by name
        if isinstance(n, ast.Name) and n.id not in pure and n is not call.func:
            return None
        if isinstance(n, ast.Attribute | ast.Subscript | ast.Lambda | ast.NamedExpr):
            return None
        pure_call = isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in pure
        if isinstance(n, ast.Call) and n is not call and (not pure_call or n.keywords):
            return None
    args: list[Any] = []
    for a in call.args:
        ok, v = _literal(a)
        if not ok or isinstance(a, ast.Starred):
            return None
        args.append(v)
    kwargs: dict[str, Any] = {}
    for kw in call.keywords:
        ok, v = _literal(kw.value)
        if not ok or kw.arg is None:
            return None
        kwargs[kw.arg] = v
    inside = {id(n) for n in ast.walk(call)}
    for n in _order(test):  # what runs before the call: literals and pure names only
        if id(n) in inside:
            break
        if isinstance(n, ast.Call) or (isinstance(n, ast.expr) and not _plain(n, pure)):
            return None
    return cands[name], args, kwargs


def _plain(n: ast.expr, pure: set[str]) -> bool:
    """A node that cannot raise or run code when evaluated: a literal or a pure name."""
    if isinstance(n, ast.Name):
        return n.id in pure
    return _literal(n)[0]


def _inert(st: ast.stmt) -> bool:
    """``pass``, a docstring, or ``name = literal``: nothing that can reach the candidate."""
    if isinstance(st, ast.Pass):
        return True
    if isinstance(st, ast.Expr):
        return isinstance(st.value, ast.Constant)
    if isinstance(st, ast.Assign):
        return all(isinstance(t, ast.Name) for t in st.targets) and _literal(st.value)[0]
    return False


def leading_calls(
    stmts: list[ast.stmt], cands: dict[str, str], pure: set[str]
) -> list[tuple[str, list[Any], dict[str, Any]]]:
    """(function name, args, kwargs) of the calls the leading certain statements make.

    ``cands``: each name that means the candidate in ``check`` (its parameter, the entry
    point, the spec's candidate names) -> the function name the candidate is asked for.
    """
    out: list[tuple[str, list[Any], dict[str, Any]]] = []
    for st in stmts:
        if _inert(st) and not any(
            isinstance(t, ast.Name) and t.id in cands for t in getattr(st, "targets", [])
        ):
            continue
        if not isinstance(st, ast.Assert) or st.msg is not None:
            break
        one = _one_call(st.test, cands, pure)
        if one is None:
            break
        out.append(one)
    return out
