"""Per-test outcomes from the repo family's pytest plugin (``guest/outcomes_plugin.py``).

A test passes when its call phase passed and neither setup nor teardown failed; it fails when
any phase failed; it is ``error`` when it could not be collected (its file or itself) and
``missing`` when the run never reported it (killed, not collected, or a wrong id). A skipped
test is ``skipped``. Only ``passed`` counts as passing.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Literal

Outcome = Literal["passed", "failed", "skipped", "error", "missing"]

PLUGIN_MODULE = "tasksieve_outcomes"
"""The module name the plugin is installed under inside the sandbox (``-p`` takes it)."""


def parse_lines(text: str | bytes) -> dict[str, Outcome]:
    """Outcome per reported test id from the plugin's JSON lines (bad lines are skipped)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    phases: dict[str, dict[str, str]] = {}
    collect_errors: set[str] = set()
    for line in text.splitlines():
        try:
            rec = json.loads(line)
            tid, phase, outcome = str(rec["id"]), str(rec["phase"]), str(rec["outcome"])
        except (ValueError, KeyError, TypeError):
            continue
        if phase == "collect":
            collect_errors.add(tid)
            continue
        phases.setdefault(tid, {})[phase] = outcome
    result: dict[str, Outcome] = {}
    for tid, ph in phases.items():
        if "failed" in ph.values():
            result[tid] = "failed"
        elif ph.get("call") == "passed":
            result[tid] = "passed"
        elif "skipped" in ph.values():
            result[tid] = "skipped"
        else:
            result[tid] = "failed"
    for cid in collect_errors:
        result.setdefault(cid, "error")
    return result


def outcomes_for(ids: Iterable[str], reported: dict[str, Outcome]) -> dict[str, Outcome]:
    """The outcome of each id asked for: its own, its collection error, or ``missing``."""
    out: dict[str, Outcome] = {}
    for tid in ids:
        if tid in reported:
            out[tid] = reported[tid]
            continue
        path = tid.split("::", 1)[0]
        out[tid] = "error" if reported.get(path) == "error" else "missing"
    return out
