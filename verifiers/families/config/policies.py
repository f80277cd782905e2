"""Evaluate the policy checks a config task declares (``PolicyCheck``) over loaded documents.

Semantics, precisely:

- Documents: a policy applies to every document whose top-level ``kind`` is in ``kinds``
  (every document when ``kinds`` is empty). A policy that applies to no document FAILS
  ("no document of kind ..."), whatever its op: leaving a resource out is not compliance.
- Paths: segments separated by ``.``; a segment is a mapping key, optionally followed by
  selectors: ``[*]`` (every item of a list), ``[N]`` (item N of a list, 0-based) or
  ``["key.with.dots"]`` (a key that contains dots, e.g. a label). Example:
  ``spec.template.spec.containers[*].resources.limits.memory``.
- Positions: walking a path from one document gives a list of positions, each a value or
  *missing*. A key not in a mapping, an index out of range, or a step into a value of the
  wrong type (a key into a list or scalar, ``[*]`` into a mapping or scalar) yields one
  missing position. A ``null`` value counts as missing (Kubernetes treats null as unset).
  ``[*]`` over an EMPTY list yields NO positions.
- Ops, required of every position in every applicable document:
  ``exists`` - present (not missing, not null); ``absent`` - missing or null;
  ``equals`` / ``not_equals`` - present and (not) equal to ``value``, where equality is
  strict on JSON types (``true`` != ``1``; ``1`` == ``1.0``; mappings by keys and values;
  lists item by item); ``in`` - present and equal to an item of the list ``value``;
  ``matches`` - a present string in which the regex ``value`` finds a match anywhere
  (``re.search`` semantics, RE2 syntax and linear time: see ``config.regex``; anchor with
  ``^...$`` for a whole-string match; non-strings fail); ``lte`` / ``gte`` - both sides
  are numbers or Kubernetes quantities (``"512Mi"``, ``"500m"``, ``"1.5"``, ``"1e3"``,
  ``"2G"``) compared exactly as rationals; ``true``/``false`` and anything unparsable fail.
- Zero positions in an applicable document (``[*]`` over an empty list) pass ``absent`` and
  fail every other op: nothing to check is not evidence of compliance. So a missing path
  fails every op except ``absent``.

A task whose policies are malformed (bad path, ``in`` without a list, a regex RE2 refuses
such as a backreference or lookaround, ``lte`` with a non-number, duplicate ids) is reported
by ``policy_problems``, naming the policy, before anything runs.

It does NOT guard against: policies that do not express what the prompt asks (that is the
task author's job), or the time of many policies over a large tree (linear, bounded by the
loader's caps and by the caller's wall clock).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Any

from tasksieve.schemas import CheckResult, PolicyCheck
from tasksieve.verifiers.families.config.regex import RegexRejected, compile_task_regex, search

_MISSING: Any = object()
_SHOWN_VIOLATIONS = 3
_QUANTITY = re.compile(
    r"([+-]?(?:\d+(?:\.\d*)?|\.\d+))(Ki|Mi|Gi|Ti|Pi|Ei|[eE][+-]?\d{1,3}|[numkMGTPE])?"
)
_SUFFIX = {
    "Ki": Fraction(2**10), "Mi": Fraction(2**20), "Gi": Fraction(2**30),
    "Ti": Fraction(2**40), "Pi": Fraction(2**50), "Ei": Fraction(2**60),
    "n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 10**3),
    "k": Fraction(10**3), "M": Fraction(10**6), "G": Fraction(10**9),
    "T": Fraction(10**12), "P": Fraction(10**15), "E": Fraction(10**18),
}  # fmt: skip
_KEY = re.compile(r'[^.\[\]"]+')
_SELECTOR = re.compile(r'\[(?:(\*)|(\d+)|"([^"]*)")\]')


@dataclass(frozen=True)
class Segment:
    """One path step: a mapping key, every list item (``[*]``) or one list index."""

    key: str | None = None
    index: int | None = None  # None with key None: [*]

    def text(self) -> str:
        if self.key is not None:
            return f".{self.key}" if _KEY.fullmatch(self.key) else f'["{self.key}"]'
        return "[*]" if self.index is None else f"[{self.index}]"


@functools.lru_cache(maxsize=1024)
def parse_path(path: str) -> tuple[Segment, ...]:
    """Parse a policy path (grammar in the module docstring); raises ValueError if malformed."""
    segments: list[Segment] = []
    pos = 0
    while pos < len(path):
        if path[pos] == "[":
            sel = _SELECTOR.match(path, pos)
            if sel is None:
                raise ValueError(f"malformed selector in {path!r} at character {pos + 1}")
            star, index, quoted = sel.groups()
            if quoted is not None:
                segments.append(Segment(key=quoted))
            else:
                segments.append(Segment(index=None if star else int(index)))
            pos = sel.end()
            continue
        if segments:
            if path[pos] != ".":
                raise ValueError(f"expected '.' or '[' in {path!r} at character {pos + 1}")
            pos += 1
        key = _KEY.match(path, pos)
        if key is None:
            raise ValueError(f"expected a key in {path!r} at character {pos + 1}")
        segments.append(Segment(key=key.group()))
        pos = key.end()
    if not segments:
        raise ValueError("empty path")
    return tuple(segments)


def parse_quantity(text: str) -> Fraction:
    """A Kubernetes quantity (``512Mi``, ``500m``, ``1e3``, ``2``) as an exact rational."""
    m = _QUANTITY.fullmatch(text.strip())
    if m is None or len(m.group(1)) > 64:
        raise ValueError(f"not a quantity: {text!r}")
    number = Fraction(Decimal(m.group(1)))
    suffix = m.group(2) or ""
    if suffix[:1] in ("e", "E") and len(suffix) > 1:
        return number * Fraction(10) ** int(suffix[1:])
    return number * _SUFFIX.get(suffix, Fraction(1))


def as_number(value: Any) -> Fraction | None:
    """A number or quantity string as a rational; None for bools, non-finite and the rest."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        return Fraction(value) if value == value and abs(value) != float("inf") else None
    if isinstance(value, str):
        try:
            return parse_quantity(value)
        except (ValueError, InvalidOperation):
            return None
    return None


def same(a: Any, b: Any) -> bool:
    """Equality strict on JSON types: bools are not numbers; 1 == 1.0; deep for containers."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if type(a) is not type(b):
        return False
    return bool(a == b)


def policy_problems(policies: list[PolicyCheck]) -> list[str]:
    """What is wrong with a task's policies (empty when they are well formed)."""
    problems: list[str] = []
    seen: set[str] = set()
    for p in policies:
        if p.id in seen:
            problems.append(f"duplicate policy id {p.id!r}")
        seen.add(p.id)
        try:
            parse_path(p.path)
        except ValueError as e:
            problems.append(f"policy {p.id!r}: {e}")
        if p.op in ("equals", "not_equals") and p.value is None:
            problems.append(f"policy {p.id!r}: {p.op} needs a value (null means unset: use absent)")
        if p.op == "in" and not isinstance(p.value, list):
            problems.append(f"policy {p.id!r}: in needs a list value")
        if p.op == "matches":
            try:
                compile_task_regex(p.value)
            except RegexRejected as e:
                problems.append(f"policy {p.id!r}: matches needs a valid regex: {e}")
        if p.op in ("lte", "gte") and as_number(p.value) is None:
            problems.append(f"policy {p.id!r}: {p.op} needs a number or quantity value")
    return problems


def resolve(doc: Any, segments: tuple[Segment, ...]) -> list[tuple[str, Any]]:
    """Every position ``segments`` reaches in ``doc``: (concrete path, value or missing)."""
    positions: list[tuple[str, Any]] = [("", doc)]
    for seg in segments:
        step: list[tuple[str, Any]] = []
        for where, value in positions:
            if value is _MISSING or value is None:
                step.append((where + seg.text(), _MISSING))
            elif seg.key is not None:
                found = value.get(seg.key, _MISSING) if isinstance(value, dict) else _MISSING
                step.append((where + seg.text(), found))
            elif not isinstance(value, list):
                step.append((where + seg.text(), _MISSING))
            elif seg.index is None:
                step.extend((f"{where}[{i}]", item) for i, item in enumerate(value))
            else:
                item = value[seg.index] if seg.index < len(value) else _MISSING
                step.append((f"{where}[{seg.index}]", item))
        positions = step
    return [(where.lstrip("."), value) for where, value in positions]


def _violation(policy: PolicyCheck, value: Any) -> str | None:
    """Why ``value`` (one position) violates ``policy``, or None if it satisfies it."""
    present = value is not _MISSING and value is not None
    if policy.op == "absent":
        return None if not present else f"present: {_show(value)}"
    if not present:
        return "missing"
    op, want = policy.op, policy.value
    if op == "exists":
        return None
    if op == "equals":
        return None if same(value, want) else f"{_show(value)} != {_show(want)}"
    if op == "not_equals":
        return None if not same(value, want) else f"equals {_show(want)}"
    if op == "in":
        return None if any(same(value, w) for w in want) else f"{_show(value)} not in {want!r}"
    if op == "matches":
        if not isinstance(value, str):
            return f"{_show(value)} is not a string"
        return None if search(want, value) else f"{_show(value)} does not match {want!r}"
    have, limit = as_number(value), as_number(want)
    if have is None or limit is None:
        return f"{_show(value)} is not a number or quantity"
    ok = have <= limit if op == "lte" else have >= limit
    return None if ok else f"{_show(value)} not {'<=' if op == 'lte' else '>='} {want!r}"


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _label(index: int, doc: Any) -> str:
    kind = doc.get("kind") if isinstance(doc, dict) else None
    meta = doc.get("metadata") if isinstance(doc, dict) else None
    name = meta.get("name") if isinstance(meta, dict) else None
    return f"doc {index}" + (f" ({str(kind)[:64]}/{str(name)[:64]})" if kind else "")


def evaluate(policy: PolicyCheck, docs: list[Any]) -> CheckResult:
    """One check named ``policy:<id>``: the policy over every applicable document."""
    name = f"policy:{policy.id}"
    segments = parse_path(policy.path)
    applicable = [
        (i, d)
        for i, d in enumerate(docs)
        if not policy.kinds or (isinstance(d, dict) and d.get("kind") in policy.kinds)
    ]
    if not applicable:
        return CheckResult(name=name, passed=False, detail=f"no document of kind {policy.kinds}")
    violations: list[str] = []
    count = 0
    for i, doc in applicable:
        positions = resolve(doc, segments)
        count += len(positions)
        if not positions and policy.op != "absent":
            violations.append(f"{_label(i, doc)} {policy.path}: no values (empty list)")
        for where, value in positions:
            why = _violation(policy, value)
            if why is not None:
                violations.append(f"{_label(i, doc)} {where}: {why}")
    if violations:
        shown = "; ".join(violations[:_SHOWN_VIOLATIONS])
        more = len(violations) - _SHOWN_VIOLATIONS
        tail = f" (+{more} more)" if more > 0 else ""
        return CheckResult(name=name, passed=False, detail=f"{policy.op}: {shown}{tail}"[:500])
    return CheckResult(
        name=name, passed=True, detail=f"{count} values in {len(applicable)} documents"
    )
