"""A strict unified-diff applier in pure Python (no git, no ``patch`` program).

It applies ``diff --git`` / ``---``/``+++`` patches with ``a/`` and ``b/`` prefixes (or none),
creating files (``--- /dev/null``) and deleting them (``+++ /dev/null``). Every hunk must match
the file exactly at its stated line, or within a small offset, with all context lines equal;
there is no fuzz. Anything else raises ``PatchError`` saying which file and hunk and why.

What it refuses: absolute paths, ``..`` components, paths that pass through a symlink (a write
through a link could land outside the tree), symlinks or binary patches, renames and copies, and
a file created where one exists. It applies all or nothing: every file's new text is computed
before anything is written.
"""

from __future__ import annotations

import os
import re
import stat

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_MAX_OFFSET = 50


class PatchError(Exception):
    """The patch is malformed, unsafe, or does not apply; the message says where."""


def _clean_path(raw: str) -> str | None:
    """The repository-relative path named by a ``---``/``+++`` line (None for /dev/null)."""
    name = raw.split("\t", 1)[0].strip()
    if name.startswith('"') and name.endswith('"'):
        name = name[1:-1]
    if name == "/dev/null":
        return None
    if name.startswith(("a/", "b/")):
        name = name[2:]
    if not name or name.startswith("/"):
        raise PatchError(f"absolute or empty path in patch: {raw.strip()!r}")
    parts = name.split("/")
    if any(p in ("", ".", "..") for p in parts) or "\x00" in name:
        raise PatchError(f"path leaves the repository or is not normal: {name!r}")
    return name


def lines_of(text: str) -> list[str]:
    """``text`` split after each ``\\n`` only (``str.splitlines`` also splits at form feeds
    and other separators that may sit inside a source line)."""
    parts = text.split("\n")
    out = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        out.append(parts[-1])
    return out


def _parse(text: str) -> list[tuple[str | None, str | None, list[tuple[int, list[str]]]]]:
    """(old path, new path, hunks) per file; a hunk is (old start, its lines with prefixes)."""
    lines = lines_of(text)
    files: list[tuple[str | None, str | None, list[tuple[int, list[str]]]]] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith(("GIT binary patch", "Binary files ")):
            raise PatchError(f"binary patches are not supported: {line.strip()!r}")
        if line.startswith(("rename from", "copy from", "rename to", "copy to")):
            raise PatchError(f"renames and copies are not supported: {line.strip()!r}")
        if line.startswith(("new file mode 120000", "new mode 120000", "deleted file mode 120000")):
            raise PatchError("patches that create or change symlinks are not supported")
        if (
            not line.startswith("--- ")
            or i + 1 >= len(lines)
            or not lines[i + 1].startswith("+++ ")
        ):
            i += 1
            continue
        old, new = _clean_path(line[4:]), _clean_path(lines[i + 1][4:])
        if old is None and new is None:
            raise PatchError("a file diff with /dev/null on both sides")
        i += 2
        hunks: list[tuple[int, list[str]]] = []
        while i < len(lines) and lines[i].startswith("@@"):
            m = _HUNK.match(lines[i])
            if not m:
                raise PatchError(f"{new or old}: malformed hunk header {lines[i].strip()!r}")
            old_len = int(m.group(2)) if m.group(2) is not None else 1
            new_len = int(m.group(4)) if m.group(4) is not None else 1
            start = int(m.group(1))
            i += 1
            body: list[str] = []
            seen_old = seen_new = 0
            while i < len(lines) and (seen_old < old_len or seen_new < new_len):
                hl = lines[i]
                tag = hl[:1]
                if tag == "\\":
                    if body:
                        body[-1] = body[-1].rstrip("\n")
                    i += 1
                    continue
                if tag in (" ", "\n"):
                    seen_old += 1
                    seen_new += 1
                    hl = " \n" if tag == "\n" else hl
                elif tag == "-":
                    seen_old += 1
                elif tag == "+":
                    seen_new += 1
                else:
                    raise PatchError(f"{new or old}: hunk at -{start} ends early ({hl.strip()!r})")
                body.append(hl)
                i += 1
            if seen_old != old_len or seen_new != new_len:
                raise PatchError(f"{new or old}: hunk at -{start} is truncated")
            while i < len(lines) and lines[i].startswith("\\"):
                if body:
                    body[-1] = body[-1].rstrip("\n")
                i += 1
            hunks.append((start, body))
        if not hunks and not (old is None or new is None):
            raise PatchError(f"{new or old}: a file diff without hunks")
        files.append((old, new, hunks))
    if not files:
        raise PatchError("no file diffs found (want a unified diff with ---/+++ headers)")
    return files


def _check_inside(root: str, rel: str) -> str:
    """``root/rel`` after checking no existing component of ``rel`` is a symlink."""
    cur = root
    for part in rel.split("/"):
        cur = os.path.join(cur, part)
        try:
            st = os.lstat(cur)
        except FileNotFoundError:
            break
        if stat.S_ISLNK(st.st_mode):
            raise PatchError(f"{rel}: the path passes through a symlink; refused")
    return os.path.join(root, rel)


def _apply_hunks(rel: str, old: list[str], hunks: list[tuple[int, list[str]]]) -> list[str]:
    out: list[str] = []
    pos = 0
    for n, (start, body) in enumerate(hunks, 1):
        want = [h[1:] for h in body if h[:1] in (" ", "-")]
        repl = [h[1:] for h in body if h[:1] in (" ", "+")]
        at = _find(old, want, max(start - 1, 0) if want else start, pos)
        if at is None:
            shown = "".join(body[:6])
            raise PatchError(f"{rel}: hunk {n} (at line {start}) does not apply:\n{shown}")
        out.extend(old[pos:at])
        out.extend(repl)
        pos = at + len(want)
    out.extend(old[pos:])
    return out


def _find(old: list[str], want: list[str], guess: int, floor: int) -> int | None:
    for delta in range(_MAX_OFFSET + 1):
        for at in (guess - delta, guess + delta) if delta else (guess,):
            if at < floor or at + len(want) > len(old):
                continue
            if old[at : at + len(want)] == want:
                return at
    return None


def apply_patch(root: str, text: str) -> list[str]:
    """Apply ``text`` to the tree at ``root``; returns the paths it changed (all or nothing)."""
    if not text.strip():
        return []
    plan: list[tuple[str, list[str] | None]] = []
    for old, new, hunks in _parse(text):
        rel = new if new is not None else old
        assert rel is not None
        if old is not None and new is not None and old != new:
            raise PatchError(f"renames are not supported: {old} -> {new}")
        path = _check_inside(root, rel)
        exists = os.path.lexists(path)
        if old is None:
            if exists:
                raise PatchError(f"{rel}: the patch creates a file that already exists")
            content: list[str] = []
        else:
            if not exists or not os.path.isfile(path):
                raise PatchError(f"{rel}: the patch changes a file that does not exist")
            with open(path, encoding="utf-8", errors="surrogateescape", newline="") as fh:
                content = lines_of(fh.read())
        result = _apply_hunks(rel, content, hunks)
        if new is None:
            if result:
                raise PatchError(f"{rel}: the deletion does not remove every line")
            plan.append((rel, None))
        else:
            plan.append((rel, result))
    for rel, planned in plan:
        path = _check_inside(root, rel)
        if planned is None:
            os.unlink(path)
            continue
        os.makedirs(os.path.dirname(path) or root, exist_ok=True)
        _check_inside(root, rel)
        with open(path, "w", encoding="utf-8", errors="surrogateescape", newline="") as fh:
            fh.write("".join(planned))
    return [rel for rel, _ in plan]
