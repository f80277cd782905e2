"""Task regexes run on candidate text with RE2: matching time is linear in the text's length.

Every regex a config task applies to candidate data (``matches`` policies, JSON Schema
``pattern`` and ``patternProperties``) goes through ``search`` here, never through ``re``: RE2
has no backtracking, so a task's ``(a+)+$`` against ``"aaaa...!"`` costs one pass over the
string instead of exponential time.

Syntax is RE2's, which is Python's minus backreferences (``\\1``, ``(?P=x)``), lookaround
(``(?=``, ``(?!``, ``(?<=``, ``(?<!``), atomic and possessive forms and ``\\Z``. Those are
refused by ``compile_task_regex`` with ``RegexRejected`` (a task problem: its author must
rewrite the regex), never silently treated as match or no match. Semantics that differ from
``re`` and agree with ECMA-262 (the dialect JSON Schema names): ``$`` matches only at the very
end of the text (not before a final newline), and ``\\d``, ``\\w``, ``\\s``, ``\\b`` are ASCII.
A lone surrogate in candidate text (possible from JSON ``"\\ud800"``) is matched as U+FFFD.

It does NOT guard against: the cost of a huge pattern (compilation is bounded by RE2's default
8 MiB program memory, beyond which the pattern is refused; matching is O(text x pattern) in
the worst case, not O(text)), or a regex that does not say what its task means.
"""

from __future__ import annotations

import functools
from typing import Any

import re2

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # RE2 would print every refused pattern to stderr


class RegexRejected(ValueError):
    """A task regex RE2 cannot compile; the message names the construct and how to fix it."""


def _reason(error: Exception) -> str:
    raw = error.args[0] if error.args else error
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
    return text[:200]


@functools.lru_cache(maxsize=1024)
def _compiled(pattern: str) -> Any:
    try:
        return re2.compile(pattern, _OPTIONS)
    except re2.error as e:
        raise RegexRejected(
            f"regex {pattern[:80]!r} is not supported ({_reason(e)}); rewrite it without "
            "backreferences, lookaround or possessive/atomic groups"
        ) from None


def compile_task_regex(pattern: Any) -> Any:
    """The compiled RE2 program for ``pattern`` (cached); raises RegexRejected if it has none."""
    if not isinstance(pattern, str):
        raise RegexRejected(f"regex must be a string, not {type(pattern).__name__}")
    return _compiled(pattern)


def search(pattern: str, text: str) -> bool:
    """Whether ``pattern`` matches anywhere in ``text`` (``re.search`` semantics, RE2 syntax)."""
    program = compile_task_regex(pattern)
    try:
        return program.search(text) is not None
    except UnicodeEncodeError:  # lone surrogates cannot be UTF-8 encoded for RE2
        clean = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        return program.search(clean) is not None
