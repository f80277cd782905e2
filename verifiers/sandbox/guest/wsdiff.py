"""Guest: what a workspace holds now, reported to the host, which turns it into a diff.

Standard library only (inlined into the guest agent, imported by the host side). The guest
never reads the snapshot (the lower layer): no path to it exists in the session, so a hidden
test file the agent's view lost stays out of reach. It reports what it has; the host
(``verifiers.sandbox.wshostdiff``) compares that with the snapshot in its own store.

``changes(root, upper_fd)`` is that report, ``{"complete": bool, "entries": {path: entry},
"opaque": [dir, ...]}``. With an overlay's upper directory (the process backend) the entries
are what the upper layer holds: a regular file or symlink there is new or modified, a whiteout
(a 0/0 character device) is a deletion, an opaque directory hides everything the snapshot had
below it; ``complete`` is false. Without one (the docker backend, whose workspace is a full
copy) every non-directory under ``root`` is an entry and ``complete`` is true: a snapshot path
missing from the entries was deleted. An entry is ``{"k": "f", "h": sha256, "n": size, "txt":
UTF-8 text without NUL}`` for a regular file, ``{"k": "l", "to": target}`` for a symlink,
``{"k": "w"}`` for a whiteout and ``{"k": "x"}`` for anything else (a FIFO, a socket: no
content, as if absent). Every entry is opened relative to its directory's descriptor with
``O_NOFOLLOW``, so a link planted by the session's code leads nowhere.

``file_diff`` renders one path as ``git diff`` does: ``difflib`` hunks under ``diff --git``
headers (``new file mode``/``deleted file mode``, ``\\ No newline at end of file``); a file
that is not UTF-8 text or holds a NUL byte in its first 8 KiB is one line, ``Binary files a/P
and b/P differ`` (``/dev/null`` on the missing side). A symlink's content is its target.
Changes of mode alone are not shown.
"""

from __future__ import annotations

import codecs
import contextlib
import difflib
import hashlib
import os
import stat
from typing import Any

_OPAQUE_XATTRS = ("trusted.overlay.opaque", "user.overlay.opaque")
_CHUNK = 1 << 20


def _opaque(dir_fd: int) -> bool:
    for name in _OPAQUE_XATTRS:
        with contextlib.suppress(OSError):
            if os.getxattr(dir_fd, name) == b"y":
                return True
    return False


def describe(dir_fd: int, name: str) -> dict[str, Any] | None:
    """The entry of ``name`` in ``dir_fd`` (see the module doc); None for a directory."""
    st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    if stat.S_ISDIR(st.st_mode):
        return None
    if stat.S_ISLNK(st.st_mode):
        return {"k": "l", "to": os.readlink(name, dir_fd=dir_fd)}
    if stat.S_ISCHR(st.st_mode) and st.st_rdev == 0:
        return {"k": "w"}
    if not stat.S_ISREG(st.st_mode):
        return {"k": "x"}
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(name, flags, dir_fd=dir_fd)
    except OSError:
        return {"k": "x"}
    digest, size, text = hashlib.sha256(), 0, True
    decoder = codecs.getincrementaldecoder("utf-8")()
    with open(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return {"k": "x"}
        while chunk := fh.read(_CHUNK):
            if size == 0 and b"\0" in chunk[:8192]:
                text = False
            digest.update(chunk)
            size += len(chunk)
            if text:
                try:
                    decoder.decode(chunk)
                except UnicodeDecodeError:
                    text = False
    if text:
        try:
            decoder.decode(b"", final=True)
        except UnicodeDecodeError:
            text = False
    return {"k": "f", "h": digest.hexdigest(), "n": size, "txt": text}


def changes(root: str, upper_fd: int | None) -> dict[str, Any]:
    """What the workspace at ``root`` holds (its overlay's upper layer when ``upper_fd``)."""
    complete = upper_fd is None
    if upper_fd is None:
        top = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    else:
        top = upper_fd
    entries: dict[str, dict[str, Any]] = {}
    opaque: list[str] = []
    try:
        for base, dirs, files, dfd in os.fwalk(".", dir_fd=top):
            rel = os.path.normpath(base)
            rel = "" if rel == "." else rel
            if rel and not complete and _opaque(dfd):
                opaque.append(rel)
            for name in files + dirs:  # a symlink to a directory is listed among dirs
                with contextlib.suppress(FileNotFoundError):  # removed meanwhile
                    entry = describe(dfd, name)
                    if entry is not None:
                        entries[os.path.join(rel, name)] = entry
    finally:
        if complete:
            os.close(top)
    return {"complete": complete, "entries": entries, "opaque": sorted(opaque)}


def _text(data: bytes) -> list[str] | None:
    if b"\0" in data[:8192]:
        return None
    try:
        return data.decode("utf-8").splitlines(keepends=True)
    except UnicodeDecodeError:
        return None


def file_diff(path: str, old: bytes | None, new: bytes | None, binary: bool = False) -> str:
    """The ``git diff`` text for one path (empty when its content is the same); ``binary``:
    the new side is a binary file whose bytes were not fetched."""
    if old == new and not binary:
        return ""
    head = [f"diff --git a/{path} b/{path}\n"]
    if old is None:
        head.append("new file mode 100644\n")
    elif new is None and not binary:
        head.append("deleted file mode 100644\n")
    a = "/dev/null" if old is None else f"a/{path}"
    b = "/dev/null" if new is None and not binary else f"b/{path}"
    old_lines = _text(old or b"")
    new_lines = None if binary else _text(new or b"")
    if old_lines is None or new_lines is None:
        return "".join(head) + f"Binary files {a} and {b} differ\n"
    body: list[str] = []
    for line in difflib.unified_diff(old_lines, new_lines, a, b):
        body.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(head + body)
