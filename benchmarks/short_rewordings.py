"""A rewording set that over-represents the shortest quarter of HumanEval, and its negatives.

Short items (a one- or two-line docstring, a one-line body) are where decontamination is
weakest: after a rewording, few distinctive shingles are left. This set is built to measure
exactly that. Each HumanEval prompt is parsed (``parse``: preamble, signature, prose lines,
examples as call/result pairs) and rendered again in one of these kinds:

- ``reformat``: same names and prose, the code restyled (annotations dropped or kept, other
  indentation and quotes, prose rewrapped, examples as doctests, asserts or arrows);
- ``rename_reformat``: as ``reformat`` with the entry point and parameters renamed;
- ``paraphrase_reformat``: renamed and restyled, every prose sentence restated (``restate``:
  a phrase table of its own, not the one of ``benchmarks.rewordings``);
- ``task_statement``: "Write a function ``f(a, b)`` that ..." in plain prose, restated, with
  the examples as sentences or a list;
- ``examples_changed``: the prose as written, the code restyled and renamed half the time,
  the example inputs perturbed and their outputs recomputed by running the canonical solution
  (in this process: it is the benchmark's own reference code, not a candidate's).

One more kind, ``STRESS``, stacks everything (a restated task statement whose examples are
changed): for a one-line item, what is left is the meaning, so it is measured and shown apart,
as a limit, not as part of the goal set.

The shortest quarter is by prompt plus canonical-solution length; every item of it gets
``SHORT_COPIES`` independent renderings per kind, the rest one. Everything is drawn from a
generator seeded by the seed and the rendering: the same seed gives the same set, another
seed a held-out one.

Negatives are the hand-written problems of ``tests/data/programming_problems.txt`` and
``tests/data/short_item_twins.txt`` (different problems on the topics of short HumanEval items,
in the same style), each as written and rendered as a task statement, so style is no tell.
"""

from __future__ import annotations

import ast
import random
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from benchmarks.rewordings import PROBLEMS, Problem, humaneval_rows, load_problems

KINDS = (
    "reformat",
    "rename_reformat",
    "paraphrase_reformat",
    "task_statement",
    "examples_changed",
)
STRESS = "statement_new_examples"
SHORT_COPIES = 3
TWINS = Path(__file__).resolve().parent.parent / "tests" / "data" / "short_item_twins.txt"
_ARROWS = re.compile(r"\s*(?:==>|=>|➞|->|==|should return|returns|will return)\s*")
_HEADING = re.compile(r"(?i)^\s*(?:for\s+)?examples?\s*:?\s*$|^\s*for example\s*:?\s*$")
_NAMES = ["compute", "solve_it", "my_func", "process", "answer", "calc", "do_task", "helper"]
_PARAMS = ["v", "data", "arr", "num", "s", "k", "m", "items", "txt", "w", "p", "q"]
# phrase -> alternatives; applied to prose only, each with probability 0.7
_PHRASES: dict[str, tuple[str, ...]] = {
    r"\breturn\b": ("output", "produce", "give back", "compute"),
    r"\breturns\b": ("outputs", "produces", "gives back"),
    r"\bgiven\b": ("provided", "taking", "for"),
    r"\blist\b": ("array", "sequence", "list"),
    r"\bstring\b": ("str", "text", "string value"),
    r"\bstrings\b": ("strs", "texts", "string values"),
    r"\bnumber\b": ("value", "number", "numeric value"),
    r"\bnumbers\b": ("values", "numerics"),
    r"\binteger\b": ("int", "whole number"),
    r"\bintegers\b": ("ints", "whole numbers"),
    r"\belements\b": ("items", "entries", "members"),
    r"\belement\b": ("item", "entry", "member"),
    r"\bcheck if\b": ("determine whether", "test whether", "decide if"),
    r"\bcheck whether\b": ("determine if", "test if"),
    r"\bfind\b": ("work out", "determine", "get"),
    r"\bcount\b": ("tally", "number"),
    r"\blargest\b": ("biggest", "greatest", "maximum"),
    r"\bsmallest\b": ("least", "minimum", "lowest"),
    r"\bsorted\b": ("in order", "ordered", "sorted"),
    r"\bunique\b": ("distinct", "deduplicated"),
    r"\bcharacters\b": ("chars", "letters", "symbols"),
    r"\bcharacter\b": ("char", "letter", "symbol"),
    r"\bthe input\b": ("the argument", "its input"),
    r"\binput\b": ("argument", "parameter"),
    r"\bpositive\b": ("strictly positive", "greater than zero"),
    r"\bcontaining\b": ("holding", "with"),
    r"\bcontain\b": ("include", "hold"),
    r"\bremove\b": ("drop", "delete", "eliminate"),
    r"\bfilter\b": ("select from", "keep from"),
    r"\bfunction\b": ("routine", "method", "function"),
    r"\bwrite\b": ("implement", "create", "code"),
    r"\bevenly\b": ("exactly", "without remainder"),
    r"\bin the list\b": ("in the array", "of the sequence"),
    r"\ba given\b": ("some", "an arbitrary"),
    r"\byou\b": ("we", "one"),
}
_OPENERS = (
    "Write a function `{sig}` that {body}",
    "Implement `{sig}`. It should {body}",
    "Create a Python function `{sig}` which must {body}",
    "Your task: write `{sig}` to {body}",
)


@dataclass(frozen=True)
class Parsed:
    """A def-and-docstring prompt taken apart."""

    preamble: str
    name: str
    params: tuple[tuple[str, str], ...]
    returns: str
    prose: tuple[str, ...]
    examples: tuple[tuple[str, str], ...]


def _call_args(line: str, name: str) -> tuple[str, str] | None:
    """The argument text of ``name(...)`` in ``line`` and what follows the closing paren."""
    at = re.search(rf"\b{re.escape(name)}\s*\(", line)
    if at is None:
        return None
    depth, i = 1, at.end()
    while i < len(line) and depth:
        depth += {"(": 1, ")": -1}.get(line[i], 0) if line[i] in "()" else 0
        i += 1
    return (line[at.end() : i - 1], line[i:]) if depth == 0 else None


def parse(prompt: str, entry: str = "") -> Parsed | None:
    """Split a prompt into preamble, signature, prose and examples (None if it has no def)."""
    try:
        tree = ast.parse(prompt.rstrip() + "\n    pass\n")
    except SyntaxError:
        return None
    defs = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    fn = next((d for d in defs if d.name == entry), defs[-1] if defs else None)
    if fn is None:
        return None
    lines = prompt.split("\n")
    start = fn.lineno - 1 - len(fn.decorator_list)
    preamble = "\n".join(lines[:start]).strip("\n")
    params = tuple((a.arg, ast.unparse(a.annotation) if a.annotation else "") for a in fn.args.args)
    returns = ast.unparse(fn.returns) if fn.returns else ""
    doc = ast.get_docstring(fn) or ""
    if not doc:  # a docstring after a statement (``import math`` first) is not the docstring
        strings = [
            n.value.value
            for n in fn.body
            if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)
        ]
        doc = next((v for v in strings if isinstance(v, str)), "")
    prose: list[str] = []
    examples: list[tuple[str, str]] = []
    doc_lines = doc.split("\n")
    i = 0
    while i < len(doc_lines):
        s = doc_lines[i].strip()
        i += 1
        if not s or _HEADING.match(s):
            continue
        call = _call_args(s, fn.name)
        if call is None:
            prose.append(s)
            continue
        args, rest = call
        out = _ARROWS.sub("", rest, count=1).strip().rstrip(".").strip()
        if s.startswith(">>>") and not out:
            while i < len(doc_lines) and not doc_lines[i].strip():
                i += 1
            if i < len(doc_lines) and not doc_lines[i].strip().startswith(">>>"):
                out = doc_lines[i].strip()
                i += 1
        examples.append((args.strip(), out))
    return Parsed(preamble, fn.name, params, returns, tuple(prose), tuple(examples))


def restate(sentence: str, rng: random.Random) -> str:
    """One prose sentence with phrases swapped for alternatives (case of the first letter kept)."""
    out = sentence
    for pattern, alternatives in _PHRASES.items():
        if rng.random() < 0.7:
            choice = rng.choice(alternatives)
            out = re.sub(pattern, choice, out, flags=re.IGNORECASE)
    return out


def renamed(p: Parsed, rng: random.Random) -> Parsed:
    """New names for the entry point and its parameters, also inside prose and examples."""
    names = rng.sample(_PARAMS, min(len(p.params), len(_PARAMS)))
    mapping = {
        p.name: rng.choice(_NAMES),
        **{a: b for (a, _), b in zip(p.params, names, strict=False)},
    }
    pat = re.compile(r"\b(" + "|".join(map(re.escape, mapping)) + r")\b")

    def sub(text: str) -> str:
        return pat.sub(lambda m: mapping[m.group(1)], text)

    return replace(
        p,
        name=mapping[p.name],
        params=tuple((mapping.get(a, a), t) for a, t in p.params),
        prose=tuple(sub(s) for s in p.prose),
    )


def _wrap(text: str, width: int, indent: str) -> list[str]:
    lines, line = [], ""
    for w in text.split():
        if line and len(line) + len(w) + 1 > width:
            lines.append(indent + line)
            line = ""
        line = f"{line} {w}".strip()
    return lines + ([indent + line] if line else [])


def render_code(p: Parsed, rng: random.Random) -> str:
    """The prompt as code again, in another style: annotations, indent, quotes, examples."""
    hints = rng.random() < 0.5
    indent = rng.choice(["  ", "    ", "\t"])
    quote = rng.choice(['"""', "'''"])
    params = ", ".join(f"{a}: {t}" if hints and t else a for a, t in p.params)
    ret = f" -> {p.returns}" if hints and p.returns else ""
    preamble = p.preamble
    if rng.random() < 0.3:  # imports dropped; helper functions the statement names stay
        preamble = "\n".join(
            ln for ln in preamble.split("\n") if not ln.startswith(("import ", "from "))
        ).strip("\n")
    head = preamble + "\n\n\n" if preamble else ""
    lines = [f"{head}def {p.name}({params}){ret}:", indent + quote]
    lines += _wrap(" ".join(p.prose), rng.choice([50, 70, 90]), indent)
    style = rng.choice(["doctest", "assert", "arrow"])
    if p.examples:
        lines.append("")
    for args, out in p.examples:
        call = f"{p.name}({args})"
        if style == "doctest" or not out:
            lines += [f"{indent}>>> {call}"] + ([f"{indent}{out}"] if out else [])
        elif style == "assert":
            lines.append(f"{indent}assert {call} == {out}")
        else:
            lines.append(f"{indent}{call} -> {out}")
    lines.append(indent + quote)
    return "\n".join(lines) + "\n"


def render_statement(p: Parsed, rng: random.Random) -> str:
    """The prompt as a plain task statement: an opener, the prose, examples as prose or list."""
    sig = f"{p.name}({', '.join(a for a, _ in p.params)})"
    body = " ".join(p.prose).strip() or "behave as the examples below show."
    body = body[0].lower() + body[1:]
    text = rng.choice(_OPENERS).format(sig=sig, body=body)
    if p.examples and rng.random() < 0.5:
        text += "\n\nExamples:\n" + "\n".join(f"- `{p.name}({a})` -> `{o}`" for a, o in p.examples)
    elif p.examples:
        said = [f"{p.name}({a}) should return {o}" for a, o in p.examples if o]
        text += "\n\nFor instance, " + "; ".join(said) + "." if said else ""
    return text + "\n"


def _perturb(value: Any, rng: random.Random) -> Any:
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value + rng.choice([1, 2, 3]) if value >= 0 else value - rng.choice([1, 2])
    if isinstance(value, float):
        return round(value + rng.choice([0.5, 1.25, 2.0]), 2)
    if isinstance(value, list):
        out = [_perturb(v, rng) for v in value]
        rng.shuffle(out)
        return out
    if isinstance(value, str) and value:
        return "".join(rng.sample(value, len(value)))
    return value


def changed_examples(p: Parsed, row: dict[str, str], rng: random.Random) -> Parsed:
    """Examples with perturbed inputs and outputs recomputed by the canonical solution."""
    space: dict[str, Any] = {}
    try:
        exec(row["prompt"] + row["canonical_solution"], space)
    except Exception:
        return p
    fn = space[row["entry_point"]]
    new: list[tuple[str, str]] = []
    for args, out in p.examples:
        try:
            values = ast.literal_eval(f"({args},)")
            moved = tuple(_perturb(v, rng) for v in values)
            got = fn(*moved)
            new.append((", ".join(map(repr, moved)), repr(got)))
        except Exception:
            new.append((args, out))
    return replace(p, examples=tuple(new))


def reword_short(row: dict[str, str], kind: str, rng: random.Random) -> str:
    """One rewording of a HumanEval row (``prompt``, ``entry_point``, ``canonical_solution``)."""
    p = parse(row["prompt"], row["entry_point"])
    if p is None:
        raise ValueError(f"{row['task_id']}: prompt has no parsable def")
    if kind == "reformat":
        return render_code(p, rng)
    if kind == "rename_reformat":
        return render_code(renamed(p, rng), rng)
    if kind == "examples_changed":
        moved = changed_examples(p, row, rng)
        return render_code(renamed(moved, rng) if rng.random() < 0.5 else moved, rng)
    restated = replace(p, prose=tuple(restate(s, rng) for s in p.prose))
    if kind == "paraphrase_reformat":
        return render_code(renamed(restated, rng), rng)
    if kind == "task_statement":
        return render_statement(renamed(restated, rng) if rng.random() < 0.5 else restated, rng)
    if kind == STRESS:
        moved = changed_examples(restated, row, rng)
        return render_statement(renamed(moved, rng) if rng.random() < 0.5 else moved, rng)
    raise ValueError(f"unknown rewording kind {kind!r}; one of {', '.join((*KINDS, STRESS))}")


def shortest_quarter(rows: list[dict[str, str]]) -> set[str]:
    """Task ids of the quarter of ``rows`` with the shortest prompt plus canonical solution."""
    ranked = sorted(
        rows, key=lambda r: (len(r["prompt"]) + len(r["canonical_solution"]), r["task_id"])
    )
    return {r["task_id"] for r in ranked[: len(rows) // 4]}


@dataclass(frozen=True)
class Positive:
    """A reworded item: which item, which kind, whether it is in the shortest quarter."""

    item: str
    kind: str
    short: bool
    text: str


def positives(seed: int, kinds: tuple[str, ...] = KINDS) -> list[Positive]:
    """Every item under every kind; the shortest quarter ``SHORT_COPIES`` times each.

    Each rendering draws from its own generator, seeded by (seed, item, kind, copy): the set
    of one kind does not change when other kinds are added or dropped.
    """
    rows = humaneval_rows()
    short = shortest_quarter(rows)
    out: list[Positive] = []
    for row in rows:
        copies = SHORT_COPIES if row["task_id"] in short else 1
        for kind in kinds:
            for copy in range(copies):
                rng = random.Random(f"{seed}:{row['task_id']}:{kind}:{copy}")
                text = reword_short(row, kind, rng)
                out.append(Positive(row["task_id"], kind, row["task_id"] in short, text))
    return out


def negatives(seed: int) -> list[Problem]:
    """The hand-written problems and short-item twins, as written and as task statements."""
    rng = random.Random(seed)
    base = load_problems(PROBLEMS) + load_problems(TWINS)
    out = list(base)
    for prob in base:
        p = parse(prob.text)
        if p is not None:
            text = render_statement(replace(p, prose=tuple(restate(s, rng) for s in p.prose)), rng)
            out.append(Problem(prob.ident + ":statement", text, prob.twin_of))
    return out
