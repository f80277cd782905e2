"""Helpers for the ``process`` sandbox: file-name checks, scratch files, limit guesses.

``read_nofollow`` never follows a symlink a sandboxed run planted; it does NOT protect against
hard links (a run can only hard-link files it can already see).
"""

from __future__ import annotations

import json
import os
import signal
import stat
import tempfile


def check_name(name: str) -> None:
    """Reject absolute names, ``..`` and empty parts (names stay inside the scratch dir)."""
    parts = name.split("/")
    if not name or name.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise ValueError(f"sandbox file names must be relative paths without '..', got {name!r}")


def host_scratch(files: dict[str, bytes | str], uid: int | None) -> str:
    """A fresh host scratch dir holding ``files`` read-only, owned by ``uid`` when given."""
    scratch = tempfile.mkdtemp(prefix="tasksieve-sbx-")
    for name, content in files.items():
        path = os.path.join(scratch, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as fh:
            fh.write(content.encode() if isinstance(content, str) else content)
        os.chmod(path, 0o444)
    if uid is not None:
        os.chown(scratch, uid, uid)
    return scratch


def read_nofollow(root: str, name: str, cap: int) -> bytes | None:
    """Read ``root/name`` without following any symlink; None if absent, odd or over ``cap``."""
    parts = name.split("/")
    fds: list[int] = []
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
        fds.append(fd)
        for p in parts[:-1]:
            fd = os.open(p, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            fds.append(fd)
        fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fd)
        fds.append(fd)
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > cap:
            return None
        data = os.read(fd, cap + 1)
        return data if len(data) <= cap else None
    except OSError:
        return None
    finally:
        for f in fds:
            os.close(f)


def parse_frames(buf: bytes) -> dict[str, bytes]:
    """Decode the collector's frames (see ``launchers.COLLECTOR``) into name -> bytes."""
    out: dict[str, bytes] = {}
    pos = 0
    while pos < len(buf):
        nl = buf.find(b"\n", pos)
        if nl < 0:
            break
        try:
            head = json.loads(buf[pos:nl])
            name, size = str(head["name"]), int(head["size"])
        except (ValueError, KeyError, TypeError):
            break
        pos = nl + 1
        if size >= 0:
            out[name] = buf[pos : pos + size]
            pos += size
    return out


def limit_from(code: int, stderr: bytes) -> str | None:
    """Best-effort guess of the limit that stopped a run (stderr text is only a hint)."""
    if code == 128 + signal.SIGXCPU:
        return "cpu"
    if code == 128 + signal.SIGXFSZ:
        return "file_size"
    tail = stderr[-4000:]
    if b"MemoryError" in tail or b"Cannot allocate memory" in tail or b"bad_alloc" in tail:
        return "memory"
    if b"File too large" in tail or b"No space left on device" in tail:
        return "file_size"
    if b"Resource temporarily unavailable" in tail and b"fork" in tail.lower():
        return "processes"
    return None
