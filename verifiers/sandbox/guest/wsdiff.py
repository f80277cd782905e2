"""Guest: a workspace's changes against its snapshot, as a unified diff git can apply.

Standard library only (inlined into the guest agent). With an overlay the changed paths come
from the upper layer (``overlay_changes``): a regular file or symlink there is new or
modified, a whiteout (a 0/0 character device) is a deletion, an opaque directory hides
everything the snapshot had below it. Without one (the docker backend) both trees are walked
and compared (``walk_changes``). Text files get ``difflib`` hunks under ``diff --git``
headers (``new file mode``/``deleted file mode`` for added and removed files, ``\\ No newline
at end of file`` where due); a file that is not UTF-8 text or holds a NUL byte in its first
8 KiB is one line, ``Binary files a/P and b/P differ`` (``/dev/null`` on the missing side),
as ``git diff`` prints it without ``--binary``. A symlink's content is its target. Changes of
mode alone are not shown.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import stat

_WHITEOUT_XATTRS = ("trusted.overlay.opaque", "user.overlay.opaque")


def _opaque(dir_fd: int) -> bool:
    for name in _WHITEOUT_XATTRS:
        with contextlib.suppress(OSError):
            if os.getxattr(dir_fd, name) == b"y":
                return True
    return False


def _files_below(top: str) -> set[str]:
    """Every non-directory path below ``top``, relative to it (no symlinks followed)."""
    found: set[str] = set()
    for base, dirs, files in os.walk(top):
        rel = os.path.relpath(base, top)
        for name in files + [d for d in dirs if os.path.islink(os.path.join(base, d))]:
            found.add(os.path.normpath(os.path.join(rel, name)))
    return found


def overlay_changes(upper_fd: int, lower: str) -> set[str]:
    """Paths (relative) that differ between the overlay's upper layer and ``lower``."""
    changed: set[str] = set()
    for base, dirs, files, dfd in os.fwalk(".", dir_fd=upper_fd):
        rel = os.path.normpath(base)
        rel = "" if rel == "." else rel
        if rel and _opaque(dfd):
            changed |= {os.path.join(rel, p) for p in _files_below(os.path.join(lower, rel))}
        for name in files + dirs:
            path = os.path.join(rel, name)
            st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            whiteout = stat.S_ISCHR(st.st_mode) and st.st_rdev == 0
            if whiteout and os.path.isdir(os.path.join(lower, path)):
                changed |= {os.path.join(path, p) for p in _files_below(os.path.join(lower, path))}
            elif not stat.S_ISDIR(st.st_mode) or stat.S_ISLNK(st.st_mode):
                changed.add(path)
    return changed


def walk_changes(root: str, lower: str) -> set[str]:
    """Paths (relative) whose presence or content differs between ``root`` and ``lower``."""
    ours, theirs = _files_below(root), _files_below(lower)
    changed = ours ^ theirs
    for path in ours & theirs:
        if _content(os.path.join(root, path)) != _content(os.path.join(lower, path)):
            changed.add(path)
    return changed


def _content(path: str) -> bytes | None:
    """A file's bytes, a symlink's target, or None (missing, or not a file)."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if stat.S_ISLNK(st.st_mode):
        return os.readlink(path).encode()
    if not stat.S_ISREG(st.st_mode):
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with open(fd, "rb") as fh:
        return fh.read() if stat.S_ISREG(os.fstat(fd).st_mode) else None


def _text(data: bytes) -> list[str] | None:
    if b"\0" in data[:8192]:
        return None
    try:
        return data.decode("utf-8").splitlines(keepends=True)
    except UnicodeDecodeError:
        return None


def file_diff(path: str, old: bytes | None, new: bytes | None) -> str:
    """The ``git diff`` text for one path (empty when its content is the same)."""
    if old == new:
        return ""
    head = [f"diff --git a/{path} b/{path}\n"]
    if old is None:
        head.append("new file mode 100644\n")
    elif new is None:
        head.append("deleted file mode 100644\n")
    a = "/dev/null" if old is None else f"a/{path}"
    b = "/dev/null" if new is None else f"b/{path}"
    old_lines, new_lines = _text(old or b""), _text(new or b"")
    if old_lines is None or new_lines is None:
        return "".join(head) + f"Binary files {a} and {b} differ\n"
    body: list[str] = []
    for line in difflib.unified_diff(old_lines, new_lines, a, b):
        body.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(head + body)


def workspace_diff(root: str, lower: str, upper_fd: int | None) -> str:
    """Every change of ``root`` against ``lower``, sorted by path."""
    paths = overlay_changes(upper_fd, lower) if upper_fd is not None else walk_changes(root, lower)
    parts = [
        file_diff(p, _content(os.path.join(lower, p)), _content(os.path.join(root, p)))
        for p in sorted(paths)
    ]
    return "".join(parts)
