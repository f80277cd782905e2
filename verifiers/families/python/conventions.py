"""Inputs that separate the common readings of a statement, made from the tests' own calls.

A convention is *touched* when the statement or the argument types make it relevant:

- ``bounds`` (the statement speaks of a range: between, within, above, below, at least ...):
  a number argument set equal to another one, or to the smallest or largest item of a list
  argument (inclusive or exclusive);
- ``ties`` (it speaks of order: sort, order, rank, largest, top, longest ...): a list argument
  with an item repeated, with an item of equal length beside a string, or reversed (stable or
  not, which of the tied items comes first);
- ``rounding`` (round, nearest, decimals, format, percent): float arguments on halves and on
  decimal ties such as 2.675 (half to even, half up, binary float);
- ``case`` and ``whitespace`` (string arguments): the string capitalised, upper-cased, with a
  space inserted, doubled, leading or trailing;
- ``empty`` (string or list arguments): the empty value.

A convention is *open* unless the statement settles it (``strictly``, ``inclusive``, ``stable``,
``half up``, ``case-insensitive``, ``empty`` ...). Open conventions give probes of origin
``convention``: a disagreement there is the statement's ambiguity, not weak tests. Settled
ones, and round numbers for integer arguments (multiples of 10, 100, 1000 near a test value),
give ``landmark`` probes: ordinary inputs the tests should pin.

It does NOT know conventions beyond these six, or any that only show in a value the tests
never use as a seed (a float convention when every test passes integers).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

Args = tuple[list[Any], dict[str, Any]]

_TOPIC = {
    "bounds": r"between|within|range|at least|at most|above|below|greater|less|exceed|"
    r"under|over|inclusive|exclusive|limit|bound|from \w+ to",
    "ties": r"sort|order|rank|largest|smallest|highest|lowest|\btop\b|longest|shortest|"
    r"\bmax|\bmin|most|least|first|last",
    "rounding": r"round|nearest|decimal|format|percent|places|precision",
}
_SETTLED = {
    "bounds": r"strictly|inclusive|exclusive|or equal|at least|at most|and above|and below|"
    r"or more|or less|or fewer|or greater",
    "ties": r"stable|original order|ties|tie\b|alphabetical|in the order|same order",
    "rounding": r"half up|half to even|half-up|banker|away from zero|toward|truncat|round down|"
    r"rounded down|round up|rounded up|floor|ceil",
    "case": r"case",
    "whitespace": r"whitespace|spaces?\b",
    "empty": r"empty",
}


@dataclass(frozen=True)
class Made:
    """One separating input: the call, its convention, and whether the statement leaves it open."""

    call: Args
    topic: str
    detail: str
    open: bool


def topics(prompt: str) -> dict[str, bool]:
    """Conventions the statement touches by its words, each with whether it is left open
    (``case``, ``whitespace`` and ``empty`` are touched by argument types, see ``made``)."""
    low = prompt.lower()
    out = {t: bool(re.search(p, low)) for t, p in _TOPIC.items()}
    return {
        t: not re.search(_SETTLED[t], low)
        for t in ("bounds", "ties", "rounding", "case", "whitespace", "empty")
        if out.get(t, True)
    }


def _is_num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _swap(call: Args, i: int, v: Any) -> Args:
    args = list(call[0])
    args[i] = v
    return args, dict(call[1])


def _bounds(call: Args) -> Iterator[tuple[Args, str]]:
    args = call[0]
    nums = [i for i, v in enumerate(args) if _is_num(v)]
    for i in nums:
        for j in nums:
            if i != j and args[i] != args[j]:
                yield _swap(call, i, args[j]), f"argument {i + 1} equal to argument {j + 1}"
    for i in nums:
        for v in args:
            items = [x for x in v if _is_num(x)] if isinstance(v, list) else []
            for x, which in ((min(items), "smallest"), (max(items), "largest")) if items else ():
                yield _swap(call, i, x), f"argument {i + 1} equal to the {which} item"


def _ties(call: Args) -> Iterator[tuple[Args, str]]:
    for i, v in enumerate(call[0]):
        if not isinstance(v, list) or not v:
            continue
        yield _swap(call, i, [*v, v[0]]), "a repeated item"
        if len(v) > 1:
            yield _swap(call, i, v[::-1]), "the items reversed"
            yield _swap(call, i, [*v[1:], v[0]]), "the items rotated"
        for x in v:
            if isinstance(x, str) and x:
                twin = "".join("a" if c != "a" else "b" for c in x)
                yield _swap(call, i, [*v, twin]), "two strings of equal length"
                break


def _rounding(call: Args) -> Iterator[tuple[Args, str]]:
    for i, v in enumerate(call[0]):
        if isinstance(v, float):
            for x in (0.5, 1.5, 2.5, -0.5, -1.5, 0.125, 0.375, 1.005, 2.675, 1.45):
                yield _swap(call, i, x), f"{x} (a half or a decimal tie)"


def _case(call: Args) -> Iterator[tuple[Args, str]]:
    for i, v in enumerate(call[0]):
        if isinstance(v, str) and any(c.isalpha() for c in v):
            yield _swap(call, i, v.capitalize()), "capitalised"
            yield _swap(call, i, v.upper()), "upper case"
            yield _swap(call, i, v.swapcase()), "case swapped"


def _whitespace(call: Args) -> Iterator[tuple[Args, str]]:
    for i, v in enumerate(call[0]):
        if not isinstance(v, str) or not v:
            continue
        if " " in v:
            yield _swap(call, i, v.replace(" ", "  ")), "doubled spaces"
        else:
            k = len(v) // 2
            yield _swap(call, i, v[:k] + " " + v[k:]), "a space inside"
        yield _swap(call, i, " " + v), "a leading space"
        yield _swap(call, i, v + " "), "a trailing space"


def _empty(call: Args) -> Iterator[tuple[Args, str]]:
    for i, v in enumerate(call[0]):
        if isinstance(v, str | list) and v:
            yield _swap(call, i, type(v)()), "empty"


def _landmarks(call: Args) -> Iterator[tuple[Args, str]]:
    for i, v in enumerate(call[0]):
        if isinstance(v, int) and not isinstance(v, bool) and abs(v) >= 10:
            for step in (10, 100, 1000):
                if abs(v) >= step:
                    low = v // step * step
                    yield _swap(call, i, low), f"round number {low}"
                    yield _swap(call, i, low + step), f"round number {low + step}"


_MAKERS = {
    "bounds": _bounds,
    "ties": _ties,
    "rounding": _rounding,
    "case": _case,
    "whitespace": _whitespace,
    "empty": _empty,
}


def made(prompt: str, seeds: list[Args]) -> list[Made]:
    """Every separating input for the conventions ``prompt`` touches, round-robin over the
    conventions so that a limit keeps some of each; then round-number landmarks."""
    touched = topics(prompt)
    per: list[list[Made]] = []
    for topic, is_open in touched.items():
        got = [Made(c, topic, d, is_open) for s in seeds for c, d in _MAKERS[topic](s)]
        per.append(got)
    out: list[Made] = []
    for k in range(max((len(p) for p in per), default=0)):
        out += [p[k] for p in per if k < len(p)]
    out += [Made(c, "landmark", d, False) for s in seeds for c, d in _landmarks(s)]
    return out
