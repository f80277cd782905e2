"""Pull the solution (code, SQL or a config file) out of a model completion.

The rule, in order:

1. Fenced blocks. A fence is a line starting (after up to 3 spaces) with three or more
   backticks or tildes and an optional language tag; it closes at a line holding only a fence
   of the same character and at least the same length. A final fence that never closes runs
   to the end of the text (for code/api, trimmed of trailing prose as in 2 if it does not
   parse; an untagged unterminated block that is not Python is ignored, as a stray closing
   fence after bare code opens one). A closing ``` glued to the end of the last code line
   (``return x```) also closes the block. Blank blocks are ignored. Blocks are ranked:
   language matching the family first (``python``/``py`` for code and api, ``sql`` and
   dialect names for sql, ``yaml``/``yml``/``json`` for config, ``diff``/``patch`` for repo),
   then untagged blocks, then
   blocks in other languages. For code with an ``entry_point`` the first block, in rank
   order, that defines ``def <entry_point>`` wins; otherwise the first block of the best
   rank.
2. No fence.
   - code/api: the text from the first line starting with ``def ``/``import ``/``from ``/
     ``class `` (or ``async def``) onward if it parses, trimmed of trailing prose (the longest
     prefix ending before an unindented line that parses); otherwise the whole text if it
     parses as Python that does something (not just a bare word); otherwise the text from
     that first code line if there is one; otherwise "".
   - sql: the text from the first line starting with SELECT or WITH (else the first SELECT
     anywhere), cut at the first top-level ``;`` and before a blank-line-separated paragraph
     that does not start like SQL.
   - config: the whole text, if some line looks like YAML/JSON (``key: value``, ``- item``,
     ``{`` or ``[``); otherwise "".

For repo tasks a block is kept byte for byte (not dedented or stripped: a diff's context lines
start with a space and a blank context line is a lone space); with no fence the diff starts at
the first ``diff --git`` or ``--- `` line.

Returns "" when nothing usable is found. What it does NOT do: check that the solution is
correct or even valid (the verifier decides), repair syntax, or split several SQL statements.
"""

from __future__ import annotations

import ast
import re
import textwrap
from dataclasses import dataclass

from tasksieve.verifiers.families.python.verifier import AST_LOCK

_LANGS: dict[str, frozenset[str]] = {
    "code": frozenset({"python", "py", "python3", "py3"}),
    "api": frozenset({"python", "py", "python3", "py3"}),
    "sql": frozenset({"sql", "duckdb", "sqlite", "postgresql", "postgres", "psql", "mysql"}),
    "config": frozenset({"yaml", "yml", "json", "jsonc"}),
    "repo": frozenset({"diff", "patch", "udiff"}),
}
_DIFF_START = re.compile(r"^(?:diff --git |--- )", re.M)
_OPEN = re.compile(r"^ {0,3}(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`\s]*)[^`]*$")
_CODE_START = re.compile(r"^(?:async\s+def|def|import|from|class)\s")
_SQL_LINE_START = re.compile(r"^\s*(?:SELECT|WITH)\b", re.IGNORECASE | re.MULTILINE)
_SQL_ANY = re.compile(r"\bSELECT\b", re.IGNORECASE)
_SQL_CONT = re.compile(
    r"^\s*(?:--|/\*|\)|,|\(|SELECT|WITH|FROM|WHERE|GROUP|ORDER|HAVING|LIMIT|OFFSET|UNION|"
    r"INTERSECT|EXCEPT|JOIN|INNER|LEFT|RIGHT|FULL|CROSS|ON|AND|OR|QUALIFY|WINDOW)\b",
    re.IGNORECASE,
)
_CONFIG_LINE = re.compile(r"^\s*(?:[\w.\"'/-]+\s*:(?:\s|$)|- |\{|\[)")


@dataclass(frozen=True)
class Block:
    """One fenced block: its language tag (lower case, may be empty) and its text."""

    lang: str
    text: str
    closed: bool = True


def fenced_blocks(text: str, raw: bool = False) -> list[Block]:
    """Every fenced block in ``text``, in order (an unterminated last one included).

    ``raw``: keep each block's lines as they are (ending in a newline) instead of tidying."""
    blocks: list[Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = _OPEN.match(lines[i])
        if not m:
            i += 1
            continue
        fence, lang = m.group("fence"), m.group("info").lower().lstrip(".{")
        body: list[str] = []
        closed = False
        i += 1
        while i < len(lines):
            line = lines[i]
            stripped = line.strip()
            if stripped and set(stripped) == {fence[0]} and len(stripped) >= len(fence):
                closed = True
                break
            if fence[0] == "`" and line.rstrip().endswith("```"):  # ``return x```
                body.append(line.rstrip()[:-3])
                closed = True
                break
            body.append(line)
            i += 1
        i += 1
        joined = "\n".join(body)
        block = (joined + "\n" if joined.strip() else "") if raw else _tidy(joined)
        if block:
            blocks.append(Block(lang, block, closed))
    return blocks


def _tidy(text: str) -> str:
    """Dedent, drop surrounding blank lines, end with one newline ("" if blank)."""
    text = textwrap.dedent(text).strip("\n")
    return text.rstrip() + "\n" if text.strip() else ""


def _defines(code: str, name: str) -> bool:
    return re.search(rf"^\s*(?:async\s+)?def\s+{re.escape(name)}\s*\(", code, re.M) is not None


def _rank(block: Block, family: str) -> int:
    if block.lang in _LANGS.get(family, frozenset()):
        return 0
    return 1 if block.lang in ("", "text", "plaintext") else 2


def _pick_block(blocks: list[Block], family: str, entry_point: str | None) -> Block:
    ranked = sorted(blocks, key=lambda b: _rank(b, family))  # stable: file order within a rank
    if family == "code" and entry_point:
        for block in ranked:
            if _defines(block.text, entry_point):
                return block
    return ranked[0]


def _trim_trailing_prose(lines: list[str]) -> str | None:
    """The longest prefix ending before an unindented line that parses as Python, or None."""
    for end in range(len(lines) - 1, 0, -1):
        if lines[end].strip() and not lines[end][0].isspace():
            head = "\n".join(lines[:end])
            if _parses(head):
                return _tidy(head)
    return None


def _parses(code: str) -> bool:
    try:
        with AST_LOCK:
            ast.parse(code)
    except (SyntaxError, ValueError):
        return False
    return True


def _does_something(code: str) -> bool:
    """True if ``code`` parses to more than bare names/constants (so "Sure" is not code)."""
    try:
        with AST_LOCK:
            tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return False
    return any(
        not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Name | ast.Constant))
        for s in tree.body
    )


def _bare_python(text: str) -> str:
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if _CODE_START.match(ln)), None)
    if start is not None:
        tail = lines[start:]
        if _parses("\n".join(tail)):
            return _tidy("\n".join(tail))
        trimmed = _trim_trailing_prose(tail)
        if trimmed:
            return trimmed
    if _does_something(text):
        return _tidy(text)
    return _tidy("\n".join(lines[start:])) if start is not None else ""


def _bare_sql(text: str) -> str:
    m = _SQL_LINE_START.search(text) or _SQL_ANY.search(text)
    if not m:
        return ""
    sql = text[m.start() :].lstrip()
    semi = _top_level_semicolon(sql)
    if semi is not None:
        sql = sql[: semi + 1]
    paragraphs = re.split(r"\n\s*\n", sql)
    kept = [paragraphs[0]]
    for para in paragraphs[1:]:
        if not _SQL_CONT.match(para):
            break
        kept.append(para)
    return _tidy("\n\n".join(kept))


def _top_level_semicolon(sql: str) -> int | None:
    """Index of the first ``;`` outside quotes and comments, or None."""
    i, n = 0, len(sql)
    while i < n:
        c = sql[i]
        if c in "'\"":
            j = sql.find(c, i + 1)
            i = n if j < 0 else j + 1
            continue
        if sql.startswith("--", i):
            j = sql.find("\n", i)
            i = n if j < 0 else j + 1
            continue
        if sql.startswith("/*", i):
            j = sql.find("*/", i + 2)
            i = n if j < 0 else j + 2
            continue
        if c == ";":
            return i
        i += 1
    return None


def _bare_config(text: str) -> str:
    if any(_CONFIG_LINE.match(ln) for ln in text.splitlines()):
        return _tidy(text)
    return ""


def extract_solution(completion: str, family: str, entry_point: str | None = None) -> str:
    """The solution inside ``completion`` for ``family`` ("" if none); rule in the module doc."""
    if family == "repo":
        return _diff(completion)
    python = family in ("code", "api")
    blocks = fenced_blocks(completion)
    if python:  # a stray closing fence after bare code opens an untagged prose "block"
        blocks = [b for b in blocks if b.closed or b.lang or _does_something(b.text)]
    if blocks:
        block = _pick_block(blocks, family, entry_point)
        if python and not block.closed and not _parses(block.text):
            return _trim_trailing_prose(block.text.splitlines()) or block.text
        return block.text
    if family == "sql":
        return _bare_sql(completion)
    if family == "config":
        return _bare_config(completion)
    return _bare_python(completion)


def _diff(completion: str) -> str:
    """A repo task's unified diff: the best-ranked fenced block, else the bare diff."""
    blocks = [b for b in fenced_blocks(completion, raw=True) if _DIFF_START.search(b.text)]
    if blocks:
        return _pick_block(blocks, "repo", None).text
    m = _DIFF_START.search(completion)
    if not m:
        return ""
    text = completion[m.start() :]
    return text if text.endswith("\n") else text + "\n"
