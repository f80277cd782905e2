"""Unified diffs between two versions of a tree, as ``git diff`` and ``patch -p1`` read them.

Paths carry the ``a/`` and ``b/`` prefixes; a file without a final newline gets the
``\\ No newline at end of file`` marker, so ``git apply`` and ``patch -p1`` reproduce its bytes.
Only text files are handled (a binary change raises ``ValueError``); adding and deleting files
are written with ``/dev/null`` on the missing side.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping

NO_NEWLINE = "\\ No newline at end of file\n"


def _text(data: bytes, path: str) -> str:
    if b"\x00" in data:
        raise ValueError(f"{path}: binary file, not diffable as text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not UTF-8 text") from None


def file_diff(path: str, old: bytes | None, new: bytes | None, context: int = 3) -> str:
    """The unified diff of one file from ``old`` to ``new`` (None: the file does not exist)."""
    if old == new:
        return ""
    a = _text(old, path).splitlines(keepends=True) if old is not None else []
    b = _text(new, path).splitlines(keepends=True) if new is not None else []
    src = f"a/{path}" if old is not None else "/dev/null"
    dst = f"b/{path}" if new is not None else "/dev/null"
    out = []
    for line in difflib.unified_diff(a, b, src, dst, n=context):
        if line.endswith("\n"):
            out.append(line)
        else:
            out.append(line + "\n" + NO_NEWLINE)
    return "".join(out)


def tree_diff(old: Mapping[str, bytes], new: Mapping[str, bytes], context: int = 3) -> str:
    """The unified diff turning the files ``old`` into ``new`` (paths sorted)."""
    parts = [
        file_diff(p, old.get(p), new.get(p), context)
        for p in sorted(set(old) | set(new))
        if old.get(p) != new.get(p)
    ]
    return "".join(parts)
