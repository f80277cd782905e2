"""Which benchmark item a contaminated task came from: entry-point names and the best-item order.

A benchmark can hold near-twin items (HumanEval/46 and /63 differ in one recurrence term): a
rewording of one passes the threshold for both. The item the task was made from is the one
whose shingles the task holds the most of, in both channels together (``best_item_first``).

Not guarded against: twins so close that a rewording holds as much of the sibling as of its
own item; both are reported, and the first is then a tie broken by score and id.
"""

from __future__ import annotations

import re

from tasksieve.schemas import Finding

ORDER = {"substring": 0, "ngram_short": 1, "containment": 3, "layout": 4, "name": 5}
_DEF_NAME = re.compile(r"\bdef\s+([A-Za-z_]\w*)")
_NAME = re.compile(r"[A-Za-z_]\w*")
NO_NAME = "\x00"


def entry_names(texts: list[str]) -> list[str]:
    """Each item's entry point (its last ``def``) if it has ``_`` and no other item has it.

    A one-word name (``add``, ``fib``) or one shared by two items says nothing about which
    item a task came from; those items get ``NO_NAME``, which no text contains.
    """
    last = [(_DEF_NAME.findall(t) or [""])[-1] for t in texts]
    seen: dict[str, int] = {}
    for name in last:
        seen[name] = seen.get(name, 0) + 1
    return [n if "_" in n and seen[n] == 1 else NO_NAME for n in last]


def names_in(text: str) -> frozenset[str]:
    """Identifier-like words of ``text`` with an underscore (candidate entry-point names)."""
    return frozenset(w for w in _NAME.findall(text) if "_" in w)


def best_item_first(found: list[Finding], weight: dict[str, float]) -> list[Finding]:
    """Findings grouped by item, best item first: largest ``weight``, then best score, then id.

    Within an item, its findings come best score first (a substring before the rest on ties).
    """
    best: dict[str, float] = {}
    for f in found:
        best[f.other_id] = max(best.get(f.other_id, 0.0), f.score)

    def key(f: Finding) -> tuple[float, float, str, float, int]:
        item = f.other_id
        return (-weight.get(item, 0.0), -best[item], item, -f.score, ORDER.get(f.method, 2))

    return sorted(found, key=key)
