"""Which tests a Python test spec defines, computed the same way inside the sandbox and out.

The parent counts results against ``plan``; the harness runs the same list, so a test that
never reports is a fail rather than a missing line. Standard library only (inlined into the
harness by ``tasksieve.verifiers.sandbox.guest.bundle``; the parent imports it).
"""

from __future__ import annotations

import ast
from typing import Any


def check_statements(test_code: str) -> list[tuple[str, ast.stmt]] | None:
    """Top-level statements of ``check``'s body as named tests, or None to run check() whole.

    Every statement that contains an ``assert`` is a test named ``check:L<line>``; the others
    are setup run in order. None when ``check`` is missing or its body can't run statement by
    statement (``return``/``yield``/``nonlocal`` at its top level).
    """
    tree = ast.parse(test_code)
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "check"), None)
    if fn is None or len(fn.args.args) != 1:
        return None
    out: list[tuple[str, ast.stmt]] = []
    for st in fn.body:
        if isinstance(st, ast.Return | ast.Nonlocal | ast.Global):
            return None
        if any(isinstance(n, ast.Yield | ast.YieldFrom) for n in ast.walk(st)):
            return None
        has_assert = any(isinstance(n, ast.Assert) for n in ast.walk(st))
        out.append((f"check:L{st.lineno}" if has_assert else "", st))
    return out


def plan(cfg: dict[str, Any]) -> list[str]:
    """The names of the tests a spec defines, in order (computed the same way in the parent)."""
    style = cfg["style"]
    if style == "asserts":
        return [f"assert_{i}" for i in range(len(cfg["asserts"]))]
    code = cfg["test_code"] or ""
    if style == "pytest":
        tree = ast.parse(code)
        names = [
            n.name
            for n in tree.body
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name.startswith("test")
        ]
        return list(dict.fromkeys(names))
    stmts = check_statements(code)
    names = [n for n, _ in stmts or [] if n]
    return names or ["check"]
