"""Mutants of a Python reference solution, made with ``ast`` and applied as text edits.

Operators (stable names, as ``Mutant.operator`` says):
``py.compare_boundary`` (< to <=, > to >=, and back), ``py.compare_negate`` (== to !=, in to
not in, is to is not, and back), ``py.arith_swap`` (+ and -, * and /, // and /, % to //,
also in ``+=``), ``py.const_off_by_one`` (an integer constant plus or minus one),
``py.return_value`` (``return x`` to ``return None``; ``return True`` to ``return False``),
``py.drop_statement`` (a statement replaced by ``pass``), ``py.bool_swap`` (``and`` and
``or``; ``not x`` to ``x``). Only code inside function bodies is mutated (module-level code is
usually the prompt: imports and docstrings), except for programs (``io`` tasks), where the
module's statements are the solution; docstrings and imports are never touched.

Each mutant changes one node: its source segment (found from the node's positions, which
``ast`` gives in UTF-8 bytes) is replaced by the mutated node's ``ast.unparse``, so the rest
of the file keeps its layout and the diff shows one change. A mutant that does not parse, or
parses to the same tree as the reference, is dropped. Selection is deterministic: candidates
are grouped by operator, each group shuffled with the seed, then taken round-robin.

It does NOT model: changed variables or calls, swapped arguments, removed branches as a
whole, or changes to module-level code (mutants cover the common slips, not every bug).
"""

from __future__ import annotations

import ast
import copy
import random
from collections.abc import Iterator
from dataclasses import dataclass

from tasksieve.verifiers.families.probes import Mutant

_BOUNDARY: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
}
_NEGATE: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}
_ARITH: dict[type[ast.operator], type[ast.operator]] = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Div,
    ast.Div: ast.Mult,
    ast.FloorDiv: ast.Div,
    ast.Mod: ast.FloorDiv,
}
_SYMBOL = {
    ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=",
    ast.In: "in", ast.NotIn: "not in", ast.Is: "is", ast.IsNot: "is not", ast.Add: "+",
    ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
}  # fmt: skip


@dataclass(frozen=True)
class _Edit:
    """Replace ``node``'s source segment by ``text``."""

    operator: str
    node: ast.AST
    text: str
    what: str


def _in_functions(tree: ast.Module, module_level: bool) -> Iterator[ast.AST]:
    """Every node inside a function body (nested functions included), in source order; with
    ``module_level``, first the module's own statements (a program), imports excepted."""
    if module_level:
        for st in tree.body:
            if _is_docstring(st) or isinstance(
                st, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Import
            ):
                continue
            yield from (
                n for n in ast.walk(st) if not isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
            )
    for top in ast.walk(tree):
        if isinstance(top, ast.FunctionDef | ast.AsyncFunctionDef):
            for st in top.body:
                if _is_docstring(st):
                    continue
                yield from (
                    n
                    for n in ast.walk(st)
                    if not isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
                )


def _is_docstring(st: ast.stmt) -> bool:
    return (
        isinstance(st, ast.Expr)
        and isinstance(st.value, ast.Constant)
        and isinstance(st.value.value, str)
    )


def _with(node: ast.AST, **changes: object) -> str:
    """``ast.unparse`` of a copy of ``node`` with some fields changed."""
    new = copy.deepcopy(node)
    for k, v in changes.items():
        setattr(new, k, v)
    return ast.unparse(new)


def _edits(tree: ast.Module, module_level: bool) -> Iterator[_Edit]:
    """Every candidate single-node change of the functions (and module code) in ``tree``."""
    seen: set[int] = set()
    for n in _in_functions(tree, module_level):
        if id(n) in seen:  # nested functions are walked from their own def too
            continue
        seen.add(id(n))
        yield from _node_edits(n)


def _node_edits(n: ast.AST) -> Iterator[_Edit]:
    if isinstance(n, ast.Compare):
        for i, op in enumerate(n.ops):
            for table, name in ((_BOUNDARY, "py.compare_boundary"), (_NEGATE, "py.compare_negate")):
                if type(op) in table:
                    new = table[type(op)]
                    ops = [*n.ops[:i], new(), *n.ops[i + 1 :]]
                    what = f"{_SYMBOL[type(op)]} to {_SYMBOL[new]}"
                    yield _Edit(name, n, _with(n, ops=ops), what)
    elif isinstance(n, ast.BinOp | ast.AugAssign) and type(n.op) in _ARITH:
        new_op = _ARITH[type(n.op)]
        what = f"{_SYMBOL[type(n.op)]} to {_SYMBOL[new_op]}"
        yield _Edit("py.arith_swap", n, _with(n, op=new_op()), what)
    elif isinstance(n, ast.Constant) and type(n.value) is int:
        for d in (1, -1):
            yield _Edit("py.const_off_by_one", n, repr(n.value + d), f"{n.value} to {n.value + d}")
    elif isinstance(n, ast.BoolOp):
        new_b: ast.boolop = ast.Or() if isinstance(n.op, ast.And) else ast.And()
        what = "and to or" if isinstance(n.op, ast.And) else "or to and"
        yield _Edit("py.bool_swap", n, _with(n, op=new_b), what)
    elif isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not):
        yield _Edit("py.bool_swap", n, "(" + ast.unparse(n.operand) + ")", "not x to x")
    if isinstance(n, ast.Return) and n.value is not None:
        v = n.value
        if isinstance(v, ast.Constant) and isinstance(v.value, bool):
            yield _Edit("py.return_value", n, f"return {not v.value}", f"return {not v.value}")
        elif not (isinstance(v, ast.Constant) and v.value is None):
            yield _Edit("py.return_value", n, "return None", "return None")
    if isinstance(n, ast.stmt) and not isinstance(
        n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Import | ast.ImportFrom
    ):
        yield _Edit("py.drop_statement", n, "pass", "statement dropped")


def _apply(src: bytes, starts: list[int], edit: _Edit) -> str | None:
    """The source with ``edit`` applied, or None when the node has no usable position."""
    n = edit.node
    end_line, end_col = getattr(n, "end_lineno", None), getattr(n, "end_col_offset", None)
    line, col = getattr(n, "lineno", None), getattr(n, "col_offset", None)
    if None in (line, col, end_line, end_col):
        return None
    a = starts[line - 1] + col  # type: ignore[operator]
    b = starts[end_line - 1] + end_col  # type: ignore[operator]
    text = edit.text
    if "\n" in text and isinstance(n, ast.expr):
        text = f"({text})"
    try:
        return (src[:a] + text.encode() + src[b:]).decode("utf-8")
    except UnicodeDecodeError:
        return None


def _line_starts(src: bytes) -> list[int]:
    starts = [0]
    for i, ch in enumerate(src):
        if ch == 0x0A:
            starts.append(i + 1)
    return starts


def all_mutants(reference: str, module_level: bool = False) -> list[Mutant]:
    """Every valid single-change mutant of ``reference``, in source order (empty when the
    reference does not parse). ``module_level``: mutate the module's own code too (for
    programs, e.g. ``io`` tasks)."""
    try:
        tree = ast.parse(reference)
    except (SyntaxError, ValueError):
        return []
    ref_dump = ast.dump(tree)
    src = reference.encode("utf-8")
    starts = _line_starts(src)
    out: list[Mutant] = []
    seen: set[str] = set()
    for edit in _edits(tree, module_level):
        text = _apply(src, starts, edit)
        if text is None or text in seen:
            continue
        try:
            dump = ast.dump(ast.parse(text))
        except (SyntaxError, ValueError):
            continue
        if dump == ref_dump:
            continue
        seen.add(text)
        where = f"line {getattr(edit.node, 'lineno', 0)}: {edit.what}"
        out.append(Mutant(edit.operator, where, text))
    return out


def select(mutants: list[Mutant], limit: int, seed: int) -> list[Mutant]:
    """At most ``limit`` mutants, spread over operators, deterministic for ``seed``."""
    if len(mutants) <= limit:
        return list(mutants)
    rng = random.Random(seed)
    groups: dict[str, list[Mutant]] = {}
    for m in mutants:
        groups.setdefault(m.operator, []).append(m)
    for g in groups.values():
        rng.shuffle(g)
    order = sorted(groups)
    out: list[Mutant] = []
    while len(out) < limit:
        for op in order:
            if groups[op] and len(out) < limit:
                out.append(groups[op].pop(0))
    return out
