"""Feedback for a failed attempt: the verdict turned into the next user message of an episode.

Multi-turn episodes (``transforms.rollouts.episode_state``) show the model what went wrong and let
it try
again. How much of the task's hidden tests the message may reveal is the *level*:

- ``none``: only the kind of failure (wrong results, did not run, over its time limit);
  nothing from the checks or the verdict's detail;
- ``summary``: adds how many checks passed of how many, and the *types* of the errors seen
  (exception class names such as ``NameError``; for SQL the engine's error class, such as
  ``Binder Error``, and the verifier's label, such as ``syntax error``), never a message,
  a check name or a value;
- ``failing``: adds the failing checks by name with their detail (each cut to
  ``CHECK_CHARS``, at most ``MAX_CHECKS``) and the verdict's detail (the error message).
  Checks named with a ``HIDDEN_PREFIXES`` prefix (a trial-deployed config's HTTP probes and
  rule tests) are only counted: their names and details describe the hidden requests; the
  verdict's detail there holds the server's own error lines.

The whole message is cut to ``MAX_CHARS``. What it does NOT guard against: a test whose own
exception class name carries information (``summary`` shows type names), and a solution that
prints hidden inputs into its error message (``failing`` shows messages: choose a lower level
for tasks whose tests must stay hidden).
"""

from __future__ import annotations

import re
from typing import get_args

from tasksieve.schemas import FeedbackLevel, Verdict

LEVELS: tuple[str, ...] = get_args(FeedbackLevel)
DEFAULT_LEVEL: FeedbackLevel = "summary"
MAX_CHARS = 2000
CHECK_CHARS = 300
MAX_CHECKS = 5
HIDDEN_PREFIXES = ("probe:", "rule_test:")

_OUTCOME = {
    "fail": "Your answer ran but did not give the expected results.",
    "error": "Your answer did not run: it raised an error or was rejected.",
    "timeout": "Your answer exceeded its time limit.",
    "infra_error": "Your answer could not be checked.",
}
_PY_TYPE = re.compile(r"\b([A-Z][A-Za-z0-9]*(?:Error|Exception|Exit|Interrupt))\b")
_SQL_TYPE = re.compile(r"\b([A-Z][a-z]+ Error)\b")
_SQL_LABELS = ("syntax error", "runtime error", "out of memory", "engine crash", "rejected")
_CLOSING = (
    "Fix the problem and reply with the complete corrected answer in one fenced code block, "
    "as before."
)


def resolve_level(task_level: FeedbackLevel | None, run_level: FeedbackLevel | None) -> str:
    """The level for one task: the run's ``--feedback`` if given, else the task's own field,
    else ``DEFAULT_LEVEL``."""
    return run_level or task_level or DEFAULT_LEVEL


def error_types(verdict: Verdict, family: str) -> list[str]:
    """The error types named in the verdict, in order of first appearance, without repeats.

    Only class names and the SQL verifier's labels; no message text.
    """
    texts = [verdict.detail, *(c.detail for c in verdict.checks if not c.passed)]
    found: list[str] = []
    for text in texts:
        names = _PY_TYPE.findall(text)
        if family == "sql":
            names = _SQL_TYPE.findall(text) + names
            low = text.lower()
            names = [label for label in _SQL_LABELS if low.startswith(label)] + names
        for name in names:
            if name not in found:
                found.append(name)
    return found


def _failing_lines(verdict: Verdict) -> list[str]:
    failing = [c for c in verdict.checks if not c.passed]
    hidden = [c for c in failing if c.name.startswith(HIDDEN_PREFIXES)]
    failing = [c for c in failing if not c.name.startswith(HIDDEN_PREFIXES)]
    lines = [f"- {c.name}: {c.detail[:CHECK_CHARS]}".rstrip() for c in failing[:MAX_CHECKS]]
    if len(failing) > MAX_CHECKS:
        lines.append(f"- ... and {len(failing) - MAX_CHECKS} more failing checks")
    if hidden:
        lines.append(f"- {len(hidden)} hidden checks failed")
    return lines


def feedback_message(verdict: Verdict, family: str, level: str, max_chars: int = MAX_CHARS) -> str:
    """The user message after a failed attempt with ``verdict``, at ``level`` (see module)."""
    if level not in LEVELS:
        raise ValueError(f"feedback level must be one of {', '.join(LEVELS)}, got {level!r}")
    parts = [_OUTCOME.get(verdict.status, "Your answer did not pass.")]
    if level in ("summary", "failing"):
        if verdict.tests_total:
            parts.append(f"{verdict.tests_passed} of {verdict.tests_total} checks passed.")
        types = error_types(verdict, family)
        if types:
            parts.append(f"Errors seen: {', '.join(types)}.")
    if level == "failing":
        lines = _failing_lines(verdict)
        if lines:
            parts.append("Failing checks:\n" + "\n".join(lines))
        if verdict.detail:
            parts.append(f"Detail: {verdict.detail[: CHECK_CHARS * 2]}")
    body = "\n".join(parts)
    room = max(0, max_chars - len(_CLOSING) - 2)
    if len(body) > room:
        body = body[: max(0, room - 3)] + "..."
    return f"{body}\n\n{_CLOSING}"
