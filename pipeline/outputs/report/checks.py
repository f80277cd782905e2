"""Read ``checks.json``, the data-quality results another step writes into a curate output.

The contract: ``{"success": bool, "results": [{"suite": str, "expectation": str,
"column": str | null, "success": bool, "unexpected_count": int | null,
"element_count": int | null, "detail": str}]}``. Reading is lenient: a missing field gets an
empty value, a result that is not an object is skipped, and a file that is not JSON or has no
``results`` list gives a ``Checks`` whose ``error`` says so (the report shows it instead of
failing). It does NOT check that the results describe this run.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CHECKS_NAME = "checks.json"
DETAIL_CHARS = 300


@dataclass(frozen=True)
class CheckRow:
    """One expectation's outcome on one batch: a row of ``checks.json`` (written and read)."""

    suite: str
    expectation: str
    column: str | None
    success: bool
    unexpected_count: int | None
    element_count: int | None
    detail: str


@dataclass(frozen=True)
class Checks:
    """``checks.json`` as read; ``error`` says why it could not be read (then no rows)."""

    success: bool | None
    results: list[CheckRow]
    error: str = ""


def _cut(value: Any) -> str:
    s = "" if value is None else str(value)
    return s if len(s) <= DETAIL_CHARS else f"{s[:DETAIL_CHARS]}… ({len(s) - DETAIL_CHARS} more)"


def _opt_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def load_checks(out: Path) -> Checks | None:
    """``checks.json`` (written by the data-quality step), None when there is none."""
    path = out / CHECKS_NAME
    if not path.exists():
        return None
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(doc, dict) or not isinstance(doc.get("results"), list):
            raise ValueError('expected an object with a "results" list')
        rows = [
            CheckRow(
                suite=str(r.get("suite", "")),
                expectation=str(r.get("expectation", "")),
                column=None if r.get("column") is None else str(r.get("column")),
                success=r.get("success") is True,
                unexpected_count=_opt_int(r.get("unexpected_count")),
                element_count=_opt_int(r.get("element_count")),
                detail=_cut(r.get("detail", "")),
            )
            for r in doc["results"]
            if isinstance(r, dict)
        ]
    except (OSError, ValueError) as e:
        return Checks(success=None, results=[], error=f"checks.json could not be read: {e}")
    success = doc.get("success")
    return Checks(success=success if isinstance(success, bool) else None, results=rows)
