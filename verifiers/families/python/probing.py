"""Extra inputs for Python tasks: type-aware mutation of the arguments the tests already use.

Seeds are the calls the task's own tests make to the function under test (the entry point,
``candidate``, or ``check``'s parameter) whose arguments are all Python literals, found with
``ast`` in ``check``/``pytest`` test code and in ``asserts``; plus the task's own
``CodeSpec.probe_inputs`` (argument lists as Python literal text, e.g. ``"[1, 2], 3"``; for
``io`` tasks, whole stdin texts). Each probe takes a seed and changes one argument by its type
(in the spirit of EvalPlus's type-aware input mutation): integers shift by one, flip sign or
become 0; floats shift or flip; strings drop, repeat or change one character, change case or
become empty; lists and tuples drop, repeat or mutate one element, reverse or become empty;
dicts drop a key or mutate a value; booleans flip. ``io`` stdin is mutated token by token
(integer tokens shift or flip, word tokens change a character), except a line holding only
a count of what follows (``n`` then ``n`` values), which would make the input malformed. A
probe equal to one of the tests' own inputs, or to an earlier probe, is dropped.

It does NOT derive inputs from calls with computed arguments (``candidate(list(range(9)))``),
from loops in the tests, or from the statement's prose; nor does it know the task's
preconditions, so some probes lie outside the contract (the reference's failure on one makes
it invalid; an answer on it still counts).
"""

from __future__ import annotations

import ast
import random
from collections.abc import Callable
from typing import Any

from tasksieve.schemas import CodeSpec

Args = tuple[list[Any], dict[str, Any]]
_MAX_NESTING = 8


def _literal_call(call: ast.Call) -> Args | None:
    try:
        args = [ast.literal_eval(a) for a in call.args if not isinstance(a, ast.Starred)]
        kwargs = {k.arg: ast.literal_eval(k.value) for k in call.keywords if k.arg}
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        return None
    if len(args) != len(call.args) or len(kwargs) != len(call.keywords):
        return None
    return args, kwargs


def _callee_names(spec: CodeSpec, tree: ast.Module | None) -> set[str]:
    names = {"candidate", *([spec.entry_point] if spec.entry_point else [])}
    if tree is not None:
        for n in tree.body:
            if isinstance(n, ast.FunctionDef) and n.name == "check" and n.args.args:
                names.add(n.args.args[0].arg)
    return names


def _calls_in(code: str, spec: CodeSpec) -> list[Args]:
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return []
    names = _callee_names(spec, tree)
    out: list[Args] = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in names:
            got = _literal_call(n)
            if got is not None:
                out.append(got)
    return out


def test_inputs(spec: CodeSpec) -> list[Args]:
    """The literal argument lists the tests call the function under test with, in order."""
    out: list[Args] = []
    if spec.test_code:
        out += _calls_in(spec.test_code, spec)
    for a in spec.asserts:
        out += _calls_in(a, spec)
    return out


def task_inputs(spec: CodeSpec) -> list[Args]:
    """The task's own ``probe_inputs`` (argument text), parsed; unparsable ones are skipped."""
    out: list[Args] = []
    for text in spec.probe_inputs:
        try:
            call = ast.parse(f"f({text})", mode="eval").body
        except (SyntaxError, ValueError):
            continue
        if isinstance(call, ast.Call):
            got = _literal_call(call)
            if got is not None:
                out.append(got)
    return out


def key(value: Any) -> str:
    """A dedupe key telling apart values Python's == would call equal (1, 1.0, True)."""
    return repr(_typed(value))


def _typed(v: Any) -> Any:
    if isinstance(v, list | tuple):
        return (type(v).__name__, [_typed(x) for x in v])
    if isinstance(v, dict):
        return ("dict", sorted((repr(_typed(k)), repr(_typed(x))) for k, x in v.items()))
    if isinstance(v, set | frozenset):
        return (type(v).__name__, sorted(repr(_typed(x)) for x in v))
    return (type(v).__name__, v)


# ---------------------------------------------------------------------------- mutation
def mutate_value(v: Any, rng: random.Random, depth: int = 0) -> Any:
    """One type-preserving change of ``v`` (``v`` itself when its type has none)."""
    if depth > _MAX_NESTING:
        return v
    if isinstance(v, bool):
        return not v
    if isinstance(v, int):
        return rng.choice([v + 1, v - 1, -v, 0, v * 2, v + rng.randint(2, 10)])
    if isinstance(v, float):
        return rng.choice([v + 0.5, v - 0.5, -v, 0.0, v * 2, v / 3])
    if isinstance(v, str):
        return _mutate_str(v, rng)
    if isinstance(v, list | tuple):
        items = _mutate_seq(list(v), rng, depth)
        return items if isinstance(v, list) else tuple(items)
    if isinstance(v, dict) and v:
        k = rng.choice(list(v))
        if rng.random() < 0.3:
            return {a: b for a, b in v.items() if a != k}
        return {**v, k: mutate_value(v[k], rng, depth + 1)}
    return v


def _mutate_str(s: str, rng: random.Random) -> str:
    if not s:
        return rng.choice(["a", " ", "A1"])
    i = rng.randrange(len(s))
    ops: list[Callable[[], str]] = [
        lambda: s[:i] + s[i + 1 :],
        lambda: s[:i] + s[i] + s[i:],
        lambda: s[:i] + rng.choice("aZ0 _-.") + s[i + 1 :],
        lambda: s.swapcase(),
        lambda: s[::-1],
        lambda: "",
        lambda: s + s[i],
    ]
    return rng.choice(ops)()


def _mutate_seq(items: list[Any], rng: random.Random, depth: int) -> list[Any]:
    if not items:
        return []
    i = rng.randrange(len(items))
    ops: list[Callable[[], list[Any]]] = [
        lambda: items[:i] + items[i + 1 :],
        lambda: [*items[:i], items[i], *items[i:]],
        lambda: [*items[:i], mutate_value(items[i], rng, depth + 1), *items[i + 1 :]],
        lambda: [*items[:i], mutate_value(items[i], rng, depth + 1), *items[i + 1 :]],
        lambda: items[::-1],
        lambda: [],
        lambda: [*items, mutate_value(items[i], rng, depth + 1)],
    ]
    return rng.choice(ops)()


def derive(seeds: list[Args], limit: int, seed: int, exclude: set[str]) -> list[Args]:
    """At most ``limit`` new argument lists made by mutating one argument of a seed."""
    rng = random.Random(seed)
    seen = set(exclude)
    out: list[Args] = []
    usable = [s for s in seeds if s[0] or s[1]]
    attempts = 0
    while usable and len(out) < limit and attempts < limit * 20:
        attempts += 1
        args, kwargs = usable[attempts % len(usable)]
        slots = [("a", i) for i in range(len(args))] + [("k", k) for k in kwargs]
        kind, where = rng.choice(slots)
        new_args, new_kwargs = list(args), dict(kwargs)
        if kind == "a":
            new_args[int(where)] = mutate_value(args[int(where)], rng)
        else:
            new_kwargs[str(where)] = mutate_value(kwargs[str(where)], rng)
        k = key((new_args, new_kwargs))
        if k in seen:
            continue
        seen.add(k)
        out.append((new_args, new_kwargs))
    return out


def call_label(entry: str, args: Args, limit: int = 160) -> str:
    """``entry(1, [2], k=3)``, shortened to ``limit`` characters."""
    parts = [repr(a) for a in args[0]] + [f"{k}={v!r}" for k, v in args[1].items()]
    text = f"{entry}({', '.join(parts)})"
    return text if len(text) <= limit else text[: limit - 4] + "...)"


# ---------------------------------------------------------------------------- io style
def _length_headers(lines: list[str]) -> set[int]:
    """Lines holding only an integer that counts the next line's tokens or the lines after
    it (``n`` then ``n`` values): changing one would make the input malformed, not new."""
    out: set[int] = set()
    for i, ln in enumerate(lines):
        tok = ln.strip()
        if not tok.lstrip("-").isdigit():
            continue
        n = int(tok)
        rest = [r for r in lines[i + 1 :] if r.strip()]
        if rest and (n == len(rest[0].split()) or n == len(rest)):
            out.add(i)
    return out


def mutate_stdin(text: str, rng: random.Random) -> str:
    """``text`` with one whitespace-separated token changed by its type (length headers, see
    ``_length_headers``, are kept)."""
    lines = text.split("\n")
    fixed = _length_headers(lines)
    spots = [
        (i, j)
        for i, ln in enumerate(lines)
        if i not in fixed
        for j, tok in enumerate(ln.split(" "))
        if tok
    ]
    if not spots:
        return text + rng.choice(["0", "a"])
    i, j = rng.choice(spots)
    toks = lines[i].split(" ")
    tok = toks[j]
    try:
        n = int(tok)
    except ValueError:
        toks[j] = _mutate_str(tok, rng) or "x"
    else:
        toks[j] = str(rng.choice([n + 1, n - 1, -n, 0, n * 2]))
    lines[i] = " ".join(toks)
    return "\n".join(lines)


def derive_stdin(seeds: list[str], limit: int, seed: int) -> list[str]:
    """At most ``limit`` new stdin texts, one token of a seed changed, none equal to a seed."""
    rng = random.Random(seed)
    seen = set(seeds)
    out: list[str] = []
    attempts = 0
    while seeds and len(out) < limit and attempts < limit * 20:
        attempts += 1
        new = mutate_stdin(seeds[attempts % len(seeds)], rng)
        if new not in seen:
            seen.add(new)
            out.append(new)
    return out
