"""ExactDedup: drop records repeating an earlier one; report same-prompt, different-tests groups.

The key is the family, the prompt after a meaning-preserving normalisation (``prompt_text``)
and the verifier spec as canonical JSON. Records are grouped by (family, prompt) first:

- one verifier spec in the group: a true duplicate. The earliest record by
  ``(source_file, source_line, id)`` survives; the others are rejected ``dedup.exact`` naming it.
- two or more specs: a conflict. Every member is rejected ``dedup.conflict``, the detail naming
  the other members (id and file:line) and the verifier fields that differ. The prompt is the
  same, so a solver cannot tell the variants apart, yet they are graded differently: at most one
  of the test suites matches what the prompt asks, and nothing here can tell which one. Keeping
  the earliest would silently pick one by file order; keeping all would put one problem with
  contradicting graders into training. Rejecting all of them (with both sides in the rejected
  rows) leaves the decision to a person, who can fix the tests and re-run.

Normalisation changes only what cannot change a reader's understanding of the prompt: Unicode
NFC, ``\\r\\n``/``\\r`` line ends, trailing whitespace of each line, runs of spaces and tabs
inside a line (after its indentation), runs of blank lines, and whitespace around the whole
text. Case, punctuation, operators, digits, indentation and line breaks all count: prompts are
read next to code and SQL, where ``<`` and ``>``, ``ASC`` and ``DESC``, ``'Alice'`` and
``'alice'``, or a statement inside and outside an ``if`` block are different tasks.

Not guarded against: a run of spaces inside a string literal (``"a  b"`` vs ``"a b"``) is
folded; prompts that differ only by a rewrapped paragraph (a line break moved) are not equal
here (near dedup catches them); a verifier spec that lists the same tests in another order is a
different spec (a conflict, which a person resolves).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import replace
from typing import Any

import apache_beam as beam
from apache_beam.typehints.decorators import no_annotations

from tasksieve.schemas import Finding
from tasksieve.transforms.runtime.common import REJECTED, count, rejected
from tasksieve.transforms.runtime.deadletter import Guarded
from tasksieve.transforms.runtime.items import Item, canonical_json, rejection, sha256_text

_INNER_SPACE = re.compile(r"(?<=\S)[ \t\f\v]+(?=\S)")
_BLANK_RUN = re.compile(r"\n{3,}")
_MAX_NAMED = 5


def prompt_text(prompt: str) -> str:
    """The prompt with only meaning-preserving whitespace and Unicode normalisation applied."""
    text = unicodedata.normalize("NFC", prompt).replace("\r\n", "\n").replace("\r", "\n")
    lines = [_INNER_SPACE.sub(" ", line.rstrip()) for line in text.split("\n")]
    return _BLANK_RUN.sub("\n\n", "\n".join(lines)).strip()


def prompt_key(item: Item) -> str:
    """Hash of the family and the normalised prompt (the group a conflict is looked for in)."""
    return sha256_text(f"{item.family}\0{prompt_text(item.prompt)}")


def spec_json(item: Item) -> str:
    """The verifier spec as canonical JSON (defaults filled in, keys sorted)."""
    return canonical_json(item.task.verifier.model_dump(mode="json"))


def differing_fields(a: Item, b: Item) -> list[str]:
    """Top-level verifier fields whose values differ between two records."""
    da = a.task.verifier.model_dump(mode="json")
    db = b.task.verifier.model_dump(mode="json")
    return sorted(k for k in da.keys() | db.keys() if da.get(k) != db.get(k))


def _where(it: Item) -> str:
    return f"{it.id} ({it.source_file}:{it.source_line})"


def conflict_detail(it: Item, others: list[Item]) -> str:
    """Names the other members of a conflict group and what differs from each."""
    parts = []
    for o in others[:_MAX_NAMED]:
        diff = differing_fields(it, o)
        what = "verifier " + ", ".join(diff) + " differ" if diff else "same verifier"
        parts.append(f"{_where(o)}: {what}")
    more = f"; and {len(others) - _MAX_NAMED} more" if len(others) > _MAX_NAMED else ""
    return (
        f"same prompt as {len(others)} other record(s) with different tests; "
        + "; ".join(parts)
        + more
        + "; all members rejected: cannot tell which tests are right"
    )


def decide_group(items: Iterable[Item], run_id: str) -> Iterator[Any]:
    """Kept items (plain) and rejection rows (tagged) for one (family, prompt) group."""
    members = sorted(items, key=lambda it: it.order_key)
    specs = {spec_json(it) for it in members} if len(members) > 1 else set()
    if len(specs) > 1:
        count("exact_dedup.conflict_groups")
        for it in members:
            others = [o for o in members if o is not it]
            yield rejected(
                rejection(
                    stage="exact_dedup",
                    reason="dedup.conflict",
                    detail=conflict_detail(it, others),
                    run_id=run_id,
                    item=it,
                )
            )
        return
    first, rest = members[0], members[1:]
    if rest:
        count("exact_dedup.duplicate_groups")
    for it in rest:
        yield rejected(
            rejection(
                stage="exact_dedup",
                reason="dedup.exact",
                detail=f"same prompt and verifier spec as {_where(first)}",
                run_id=run_id,
                item=it,
            )
        )
    found = [Finding(kind="exact_dup", other_id=it.id, method="sha256") for it in rest]
    count("exact_dedup.kept")
    yield replace(first, findings=[*first.findings, *found]) if found else first


class KeepFirstFn(beam.DoFn):
    """One (family, prompt) group: keep the earliest duplicate, or reject a conflict."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id

    def process(self, kv: tuple[str, Iterable[Item]]) -> Iterator[Any]:
        yield from decide_group(kv[1], self.run_id)


class ExactDedup(beam.PTransform):
    """Group by (family, normalised prompt); drop true duplicates, reject conflicts."""

    def __init__(self, run_id: str) -> None:
        super().__init__()
        self.run_id = run_id

    @no_annotations
    def expand(self, items: beam.PCollection) -> dict[str, beam.PCollection]:
        rid = self.run_id
        keyed = items | "KeyByPrompt" >> Guarded(
            beam.Map(lambda it: (prompt_key(it), it)), "exact_dedup", rid
        )
        out = (
            keyed["ok"]
            | "Group" >> beam.GroupByKey()
            | "KeepFirst" >> Guarded(beam.ParDo(KeepFirstFn(rid)), "exact_dedup", rid)
        )
        bad = (keyed[REJECTED], out[REJECTED]) | "Rejected" >> beam.Flatten()
        return {"ok": out["ok"], REJECTED: bad}
