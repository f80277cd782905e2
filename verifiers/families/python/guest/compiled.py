"""Compiled test code kept for the next sample: one tests process runs many samples.

Runs inside the sandbox (standard library only; inlined into the harness by
``tasksieve.verifiers.sandbox.guest.bundle``). Code objects are immutable, so running a kept
one in a fresh namespace is the same as compiling the source again; only the compile is
saved. A tests process of a multi-sample entry runs the same tests once per sample.
"""

from __future__ import annotations

import ast
import types
from typing import Any

from tasksieve.verifiers.families.python.guest.planning import check_statements

_COMPILED: dict[tuple[str, str], Any] = {}  # one tests process runs many samples: compile once


def _code(src: str, name: str) -> types.CodeType:
    """``compile(src, name, "exec")``, kept for the next sample (code objects are immutable)."""
    key = (src, name)
    if key not in _COMPILED:
        _COMPILED[key] = compile(src, name, "exec")
    return _COMPILED[key]


def _trusted_codes(src: str) -> list[types.CodeType]:
    """Each top-level statement of ``src`` compiled alone; none when it is not Python."""
    key = (src, "<trusted>")
    if key not in _COMPILED:
        try:
            tree = ast.parse(src)
            codes = [compile(ast.Module([st], []), "<trusted>", "exec") for st in tree.body]
        except (SyntaxError, ValueError):
            codes = []
        _COMPILED[key] = codes
    return list(_COMPILED[key])


def _check_codes(test_code: str) -> list[tuple[str | None, types.CodeType]] | None:
    """``check_statements`` of the test code, each statement compiled alone."""
    key = (test_code, "<check>")
    if key not in _COMPILED:
        stmts = check_statements(test_code)
        _COMPILED[key] = (
            None
            if stmts is None
            else [(n, compile(ast.Module([st], []), "check", "exec")) for n, st in stmts]
        )
    return _COMPILED[key]
