"""A code task's input contract, read from its statement and from its tests' own inputs.

Two parts, both checked on the host on plain argument values:

- ``preconditions(prompt, params)``: what the statement states about the inputs, e.g.
  ``0 <= n <= 100``, ``1 <= a, b <= 10**6``, ``lo < hi``, ``n >= 2``, ``score 0-100``,
  ``x is between 1 and 9``, "non-empty", "at least two distinct", "non-negative", "positive
  integer", "of the same length", "lowercase letters only", "a string of digits", "consists
  only of the characters '(' and ')'", "single spaces", "no leading or trailing space". A
  rule applies to the parameters a sentence names (all parameters of the right type when it
  names none) and only to values of the type it speaks of (a range to numbers, "non-empty"
  to strings and lists, a character class to strings and the strings in a list).
- ``Envelope``: the shape of the tests' inputs, per argument: the types seen, whether a
  negative number, an empty string or list was seen, and which character classes (lowercase,
  uppercase, digit, whitespace, other) strings held. Inputs mutated from the tests' own are
  kept inside it when the ambiguity check asks (``envelope=True``).

It does NOT read: preconditions stated in other words than the rules above (a probe may then
break them; the reference rejecting it still drops it), conditions on element positions
(``xs[i] <= 100``), sortedness, or anything stated only in the tests' comments.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

Args = tuple[list[Any], dict[str, Any]]
Check = Callable[[dict[str, Any]], bool]

_NUM = r"-?\d+(?:\.\d+)?(?:\s*(?:\*\*|\^)\s*\d+|e\d+)?"
_OPS = {"<": "<", "<=": "<=", "≤": "<=", ">": ">", ">=": ">=", "≥": ">="}
_OP = r"(?:<=|>=|≤|≥|<|>)"
_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5}
_QUOTED = re.compile(r"'([^']*)'|\"([^\"]*)\"")


@dataclass(frozen=True)
class Precondition:
    """One stated precondition: ``text`` as stated, ``check`` on the named arguments."""

    text: str
    check: Check

    def holds(self, named: dict[str, Any]) -> bool:
        """Whether ``named`` satisfies it (a value of another type than it speaks of does)."""
        try:
            return bool(self.check(named))
        except (TypeError, ValueError, OverflowError):
            return True


def params(reference: str, entry: str) -> list[str]:
    """The positional parameter names of ``entry`` in the reference ([] when not found)."""
    try:
        tree = ast.parse(reference)
    except (SyntaxError, ValueError):
        return []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == entry:
            return [a.arg for a in [*node.args.posonlyargs, *node.args.args]]
    return []


def named(args: Args, names: Sequence[str]) -> dict[str, Any]:
    """Argument values by parameter name (positional ones past ``names`` are left out)."""
    out = dict(zip(names, args[0], strict=False))
    out.update(args[1])
    return out


# ---------------------------------------------------------------------------- statement
def _num(text: str) -> float:
    text = text.replace(" ", "").replace("^", "**")
    if "**" in text:
        base, exp = text.split("**")
        return float(base) ** float(exp)
    return float(text)


def _is_num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _compare(a: Any, op: str, b: Any) -> bool:
    if not (_is_num(a) and _is_num(b)):
        return True
    return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]


def _sentences(prompt: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.;:!?])\s+|\n+", prompt) if s.strip()]


def _targets(sentence: str, names: Sequence[str]) -> list[str]:
    said = [n for n in names if re.search(rf"(?<![\w'\"]){re.escape(n)}(?![\w'\"(])", sentence)]
    return said or list(names)


def _chains(sentence: str, names: Sequence[str]) -> list[Precondition]:
    """``0 <= n <= 100``, ``1 <= a, b <= 10**6``, ``lo < hi``, ``n >= 2``."""
    if not names:
        return []
    name = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    term = rf"(?:{_NUM}|(?:{name})(?:\s*,\s*(?:{name}))*)"
    out: list[Precondition] = []
    for m in re.finditer(rf"(?<![\w.]){term}(?:\s*{_OP}\s*{term})+", sentence):
        if _conditional(sentence[: m.start()], sentence[m.end() :]):
            continue
        parts = re.split(rf"\s*({_OP})\s*", m.group(0))
        terms, ops = parts[0::2], parts[1::2]
        for left, op, right in zip(terms, ops, terms[1:], strict=False):
            out += _pair(left.strip(), _OPS[op], right.strip(), names, m.group(0))
    return out


def _on(name: str, test: Callable[[Any], bool]) -> Check:
    """A check of one named argument (holds when the call does not pass it)."""
    return lambda d: name not in d or test(d[name])


def _against(op: str, value: float) -> Callable[[Any], bool]:
    """``x op value`` for a number ``x`` (anything else passes)."""
    return lambda x: _compare(x, op, value)


def _between(a: str, op: str, b: str) -> Check:
    """A check comparing two named arguments."""
    return lambda d: a not in d or b not in d or _compare(d[a], op, d[b])


_CASE_WORDS = re.compile(r"\b(?:if|when|whenever|unless|otherwise|else)\s*$", re.I)
_FOR_CASE = re.compile(r"\bfor\s*$", re.I)
_THEN = re.compile(
    r"^\s*,?\s*(?:return|returns|raise|raises|the (?:result|answer)|it is|give)", re.I
)


def _conditional(before: str, after: str) -> bool:
    """Whether a comparison describes a case of the behaviour (``if n < 0``, ``For n < 1
    return []``) rather than a precondition (``for 0 <= n <= 100``, ``where n >= 2``)."""
    return bool(_CASE_WORDS.search(before)) or bool(
        _FOR_CASE.search(before) and _THEN.search(after)
    )


def _side(term: str, names: Sequence[str]) -> tuple[list[str], float | None]:
    got = [t.strip() for t in term.split(",")]
    if all(t in names for t in got):
        return got, None
    try:
        return [], _num(term)
    except ValueError:
        return [], None


def _pair(left: str, op: str, right: str, names: Sequence[str], text: str) -> list[Precondition]:
    ln, lv = _side(left, names)
    rn, rv = _side(right, names)
    out: list[Precondition] = []
    for a in ln:
        if rv is not None:
            out.append(Precondition(text, _on(a, _against(op, rv))))
        out += [Precondition(text, _between(a, op, b)) for b in rn]
    if lv is not None:
        flipped = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}[op]
        out += [Precondition(text, _on(b, _against(flipped, lv))) for b in rn]
    return out


def _ranges(sentence: str, names: Sequence[str]) -> list[Precondition]:
    """``score 0-100``, ``x is between 1 and 9``, ``n from 1 to 50``."""
    out: list[Precondition] = []
    for n in names:
        pat = (
            rf"\b{re.escape(n)}\s+(?:(?:is|lies)\s+)?(?:between\s+|from\s+|in\s+)?"
            rf"(\d+)\s*(?:-|\u2013|\.\.|to|and)\s*(\d+)\b"
        )
        for m in re.finditer(pat, sentence):
            out.append(Precondition(m.group(0), _on(n, _in_range(m.group(1), m.group(2)))))
    return out


def _in_range(lo_text: str, hi_text: str) -> Callable[[Any], bool]:
    lo, hi = float(lo_text), float(hi_text)
    return lambda x: _compare(x, ">=", lo) and _compare(x, "<=", hi)


def _each(v: Any, test: Callable[[Any], bool], kind: type | tuple[type, ...]) -> bool:
    """``test`` on ``v`` when it is of ``kind``, on each item when ``v`` is a list of them."""
    if isinstance(v, kind) and not isinstance(v, bool):
        return test(v)
    if isinstance(v, list | tuple):
        return all(test(x) for x in v if isinstance(x, kind) and not isinstance(x, bool))
    return True


def _charset(sentence: str) -> set[str] | None:
    low = sentence.lower()
    if not re.search(r"\bonly\b|consists? of|made (?:up )?of|composed of|string of", low):
        return None
    chars: set[str] = set()
    lower = "abcdefghijklmnopqrstuvwxyz"
    if "lowercase" in low or "lower-case" in low or "a-z" in sentence:
        chars |= set(lower)
    if "uppercase" in low or "upper-case" in low or "A-Z" in sentence:
        chars |= set(lower.upper())
    if re.search(r"\bletters?\b", low) and not chars:
        chars |= set(lower) | set(lower.upper())
    if "alphanumeric" in low:
        chars |= set(lower) | set(lower.upper()) | set("0123456789")
    if re.search(r"\bdigits?\b", low):
        chars |= set("0123456789")
    if re.search(r"\bspaces?\b", low):
        chars.add(" ")
    if re.search(r"\bcharacters?\b", low):
        for m in _QUOTED.finditer(sentence):
            q = m.group(1) if m.group(1) is not None else m.group(2)
            if len(q) == 1:
                chars.add(q)
    return chars or None


def _words(sentence: str, names: Sequence[str], sample: dict[str, Any]) -> list[Precondition]:
    """The rules stated in words (see the module docstring)."""
    low = _QUOTED.sub(" ", sentence).lower()
    targets = _targets(_QUOTED.sub(" ", sentence), names)
    out: list[Precondition] = []

    def add(text: str, test: Callable[[Any], bool], kind: type | tuple[type, ...]) -> None:
        out.extend(Precondition(text, _on(t, lambda x: _each(x, test, kind))) for t in targets)

    seq = (str, list, tuple)
    if re.search(r"non-?empty|not empty", low):
        out += [Precondition("non-empty", _on(t, _nonempty)) for t in targets]
    m = re.search(r"at least (\d+|one|two|three|four|five) (distinct )?", low)
    if m and not re.search(r"at least \w+ (?:of|times)", low):
        k = int(_WORDS.get(m.group(1), m.group(1)))
        size: Callable[[Any], int] = (lambda v: len(set(v))) if m.group(2) else len

        def big(v: Any) -> bool:
            return not isinstance(v, list | tuple | str) or size(v) >= k

        out += [Precondition(m.group(0).strip(), _on(t, big)) for t in targets]
    if re.search(r"non-?negative", low):
        add("non-negative", lambda x: x >= 0, (int, float))
    elif re.search(r"(?<!non-)(?<!non)\bpositive (?:integer|number|int|whole|value)", low):
        add("positive", lambda x: x > 0, (int, float))
    chars = _charset(sentence)
    if chars is not None:
        shown = "".join(sorted(chars)) if len(chars) < 12 else _classes_text(chars)
        add(f"characters from {shown!r}", lambda s: set(s) <= chars, str)
    if "single space" in low:
        add("single spaces", lambda s: "  " not in s, str)
    if re.search(r"no leading or trailing|no leading|no trailing", low):
        add("no leading or trailing space", lambda s: s == s.strip(), str)
    if re.search(r"(?:same|equal) length", low):
        seqs = [t for t in targets if isinstance(sample.get(t), seq)]
        out.append(
            Precondition(
                "of the same length",
                lambda d: len({len(d[t]) for t in seqs if isinstance(d.get(t), seq)}) <= 1,
            )
        )
    return out


def _nonempty(v: Any) -> bool:
    return not isinstance(v, str | list | tuple | dict | set) or len(v) > 0


def _classes_text(chars: set[str]) -> str:
    parts = []
    if set("abc") <= chars:
        parts.append("a-z")
    if set("ABC") <= chars:
        parts.append("A-Z")
    if set("012") <= chars:
        parts.append("0-9")
    parts += sorted(c for c in chars if not c.isalnum())
    return " ".join(parts)


def preconditions(
    prompt: str, names: Sequence[str], sample: dict[str, Any] | None = None
) -> list[Precondition]:
    """The preconditions ``prompt`` states about the parameters ``names``.

    ``sample``: one call's arguments by name, to tell which parameters are sequences.
    """
    out: list[Precondition] = []
    for sentence in _sentences(prompt):
        bare = _QUOTED.sub(" ", sentence)
        out += _chains(bare, names) + _ranges(bare, names) + _words(sentence, names, sample or {})
    return out


# ---------------------------------------------------------------------------- envelope
def _classes(s: str) -> set[str]:
    out = set()
    for c in s:
        if c.islower():
            out.add("lower")
        elif c.isupper():
            out.add("upper")
        elif c.isdigit():
            out.add("digit")
        elif c.isspace():
            out.add("space")
        else:
            out.add("other")
    return out


@dataclass
class Shape:
    """What the tests' values in one argument slot look like (see ``Envelope``)."""

    types: set[str] = field(default_factory=set)
    negative: bool = False
    empty: bool = False
    classes: set[str] = field(default_factory=set)
    items: Shape | None = None

    def add(self, v: Any) -> None:
        """Widen the shape to hold ``v``."""
        self.types.add(type(v).__name__)
        if _is_num(v) and v < 0:
            self.negative = True
        if isinstance(v, str):
            self.empty |= not v
            self.classes |= _classes(v)
        if isinstance(v, list | tuple):
            self.empty |= not v
            self.items = self.items or Shape()
            for x in v:
                self.items.add(x)

    def admits(self, v: Any) -> bool:
        """Whether ``v`` stays inside the shape (an int where floats were seen does)."""
        kind = type(v).__name__
        if kind not in self.types and not (kind == "int" and "float" in self.types):
            return False
        if _is_num(v) and v < 0 and not self.negative:
            return False
        if isinstance(v, str):
            return (bool(v) or self.empty) and _classes(v) <= self.classes
        if isinstance(v, list | tuple):
            if not v:
                return self.empty
            return self.items is None or all(self.items.admits(x) for x in v)
        return True


@dataclass
class Envelope:
    """The shape of the tests' own inputs per argument slot (position, or keyword name)."""

    slots: dict[str, Shape] = field(default_factory=dict)

    @staticmethod
    def of(calls: Sequence[Args]) -> Envelope:
        """The envelope of ``calls`` (the tests' literal calls)."""
        env = Envelope()
        for args, kwargs in calls:
            for i, v in enumerate(args):
                env.slots.setdefault(str(i), Shape()).add(v)
            for k, v in kwargs.items():
                env.slots.setdefault(k, Shape()).add(v)
        return env

    def admits(self, call: Args) -> bool:
        """Whether every argument of ``call`` fits the slot the tests used it in."""
        pairs = [(str(i), v) for i, v in enumerate(call[0])] + list(call[1].items())
        return all(k in self.slots and self.slots[k].admits(v) for k, v in pairs)
