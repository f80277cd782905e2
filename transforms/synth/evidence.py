"""What the failing tests say, turned into a problem statement that never shows the bug.

pytest's ``--tb=short -rfE`` output has one section per failing test (a ``____ name ____``
header, the traceback, ``E`` lines) and a short summary (``FAILED id - message``).
``failure_evidence`` keeps, per failing test id, its summary message and the part of its
traceback that lies in test files: frames in any other file (the package's source, where
the injected bug is, or the interpreter's libraries) are dropped with their source lines, and
so are captured output blocks. Memory addresses are blanked (``0x...``) so a statement does not
change from run to run.

It does NOT guard against: a test whose own assertion message quotes the library's source, or
a test file that prints it; the statement shows what the tests show.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from tasksieve.transforms.synth.project import PackageInfo, matches

_HEADER = re.compile(r"^_{3,} (.+?) _{3,}$")
_RULE = re.compile(r"^={3,}")
_FRAME = re.compile(r"^(\S[^:]*):(\d+): in (.+)$")
_SUMMARY = re.compile(r"^(?:FAILED|ERROR) (\S+)(?: - (.*))?$")
_ADDRESS = re.compile(r"0x[0-9a-fA-F]{4,}")
MAX_LINE = 240
MAX_LINES = 24


@dataclass(frozen=True)
class Evidence:
    """One failing test: its id, the one-line message and the test-side traceback lines."""

    test_id: str
    message: str
    lines: tuple[str, ...]


def headline(test_id: str) -> str:
    """The name pytest prints over a test's failure section (``Class.test[param]``)."""
    return ".".join(test_id.split("::")[1:]) or test_id


def _clean(line: str) -> str:
    line = _ADDRESS.sub("0x...", line.rstrip())
    return line if len(line) <= MAX_LINE else line[: MAX_LINE - 3] + "..."


def _sections(output: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in output.splitlines():
        m = _HEADER.match(line)
        if m:
            current = found.setdefault(m.group(1), [])
            continue
        if _RULE.match(line):
            current = None
            continue
        if current is not None:
            current.append(line)
    return found


def _test_side(section: list[str], test_files: Sequence[str]) -> list[str]:
    kept: list[str] = []
    keep_frame = False
    for line in section:
        if line.startswith("-" * 5) and "Captured" in line:
            break
        frame = _FRAME.match(line)
        if frame:
            keep_frame = matches(frame.group(1), test_files)
            if keep_frame:
                kept.append(_clean(line))
            continue
        if line.startswith("E ") or line == "E" or (keep_frame and line.strip()):
            kept.append(_clean(line))
    if len(kept) > MAX_LINES:
        kept = [*kept[: MAX_LINES - 1], f"... ({len(kept) - MAX_LINES + 1} more lines)"]
    return kept


def failure_evidence(
    output: str, failing: Iterable[str], test_files: Sequence[str]
) -> list[Evidence]:
    """Evidence for each id in ``failing`` (in that order) from one run's pytest output."""
    summary: dict[str, str] = {}
    for line in output.splitlines():
        m = _SUMMARY.match(line.strip())
        if m:
            summary[m.group(1)] = _clean(m.group(2) or "")
    sections = _sections(output)
    out = []
    for tid in failing:
        lines = _test_side(sections.get(headline(tid), []), test_files)
        out.append(Evidence(tid, summary.get(tid, ""), tuple(lines)))
    return out


def statement(
    info: PackageInfo, evidence: Sequence[Evidence], failing: Sequence[str], shown: int = 3
) -> str:
    """A problem statement: which tests fail and how, then what to do (never the bug itself)."""
    who = info.name if info.name != "unknown" else "this project"
    ver = f" {info.version}" if info.version != "unknown" else ""
    n = len(failing)
    parts = [
        f"A regression crept into {who}{ver}: {n} test{'s' if n != 1 else ''} of its own suite "
        f"now fail{'s' if n == 1 else ''} while the rest still pass.",
        "",
        "Failing tests:",
    ]
    listed = list(failing[:20])
    parts += [f"- {t}" for t in listed]
    if n > len(listed):
        parts.append(f"- ... and {n - len(listed)} more")
    for ev in evidence[:shown]:
        parts += ["", f"{ev.test_id}:"]
        if ev.message and not any(ev.message in line for line in ev.lines):
            parts.append(f"    {ev.message}")
        parts += [f"    {line}" for line in ev.lines]
    parts += [
        "",
        "Find the cause in the package's source and fix it so that these tests pass and every "
        "other test keeps passing. Do not change the tests. Answer with a unified diff against "
        "the repository root (paths prefixed a/ and b/).",
    ]
    return "\n".join(parts) + "\n"
