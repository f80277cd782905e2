"""The host's half of a workspace diff: the guest's report against the snapshot in the store.

A session's guest agent cannot read the snapshot (``verifiers.sandbox.guest.wsdiff``): the
lower layer is out of every session's reach, so that hidden tests stay hidden. It reports what
the workspace holds now (the overlay's upper layer, or the whole tree), each file with its
SHA-256, size and whether it is text; ``workspace_diff`` compares that with the snapshot tree on
the host and fetches only the text files that differ (``fetch``, the session's ``read_file``).
The old side of every hunk comes from the host's tree, so the diff always applies to the
snapshot, even when the session's processes change files while it is taken.

Paths in a report are checked (relative, normalised, no ``..``) and the snapshot is read one
component at a time with ``O_NOFOLLOW``, so a path the session names never leads the host
through a symlink of the snapshot to a file outside it. A text file over ``TEXT_MAX`` bytes is
shown as binary (``Binary files ... differ``, which no applier applies).

``SnapshotSession`` is a ``GuestSession`` whose ``diff`` works this way; both workspace
backends open their sessions as one.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from collections.abc import Callable
from typing import Any

from tasksieve.verifiers.sandbox.guest.wsdiff import file_diff
from tasksieve.verifiers.sandbox.workspace import WorkspaceError
from tasksieve.verifiers.sandbox.wsclient import GuestSession

TEXT_MAX = 8 << 20
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _check(path: str) -> str:
    parts = path.split("/")
    if not path or path.startswith("/") or "\0" in path or any(p in ("", ".", "..") for p in parts):
        raise WorkspaceError(f"the guest reported a bad path {path!r}")
    return path


class Lower:
    """The snapshot tree on the host, read without following its symlinks."""

    def __init__(self, root: str) -> None:
        self.root = root

    def _dir(self, parts: list[str]) -> int | None:
        """A descriptor of the directory ``parts`` (None: missing, or not a real directory)."""
        fd = os.open(self.root, _DIR_FLAGS)
        for part in parts:
            try:
                nfd = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError:
                os.close(fd)
                return None
            os.close(fd)
            fd = nfd
        return fd

    def state(self, path: str) -> tuple[str, bytes] | None:
        """``("d", b"")``, ``("l", target)``, ``("f", bytes)``, ``("x", b"")`` or None."""
        *dirs, name = path.split("/")
        dfd = self._dir(dirs)
        if dfd is None:
            return None
        try:
            st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                return ("d", b"")
            if stat.S_ISLNK(st.st_mode):
                return ("l", os.readlink(name, dir_fd=dfd).encode())
            if not stat.S_ISREG(st.st_mode):
                return ("x", b"")
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dfd)
            with open(fd, "rb") as fh:
                return ("f", fh.read())
        except FileNotFoundError:
            return None
        finally:
            os.close(dfd)

    def files_below(self, path: str) -> set[str]:
        """Every non-directory path below the directory ``path`` (empty when it is none)."""
        dfd = self._dir(path.split("/") if path else [])
        if dfd is None:
            return set()
        found: set[str] = set()
        try:
            for base, dirs, files, sub in os.fwalk(".", dir_fd=dfd):
                rel = os.path.normpath(os.path.join(path, base))
                rel = "" if rel == "." else rel
                for name in files:
                    found.add(os.path.join(rel, name))
                for name in dirs:
                    if stat.S_ISLNK(os.stat(name, dir_fd=sub, follow_symlinks=False).st_mode):
                        found.add(os.path.join(rel, name))
        finally:
            os.close(dfd)
        return found


def _same(old: tuple[str, bytes] | None, new: dict[str, Any] | None) -> bool:
    if old is None or old[0] in ("d", "x"):
        return new is None
    if new is None:
        return False
    if old[0] == "l":
        return new["k"] == "l" and new["to"].encode() == old[1]
    return new["k"] == "f" and new["h"] == hashlib.sha256(old[1]).hexdigest()


def _paths(lower: Lower, report: dict[str, Any], entries: dict[str, dict[str, Any]]) -> set[str]:
    """Every path whose presence or content may differ from the snapshot."""
    if report.get("complete"):
        return set(entries) | lower.files_below("")
    paths = set(entries)
    for path, entry in entries.items():  # a whiteout, file or link where a directory was
        if entry["k"] != "d":
            paths |= lower.files_below(path)
    for path in report.get("opaque") or []:
        paths |= lower.files_below(_check(path))
        paths.add(path)  # a file or link the new directory replaced
    return paths


def workspace_diff(
    snapshot: str, report: dict[str, Any], fetch: Callable[[str], bytes | None]
) -> str:
    """The unified diff of ``report`` (``wsdiff.changes``) against ``snapshot``."""
    raw = report.get("entries")
    if not isinstance(raw, dict):
        raise WorkspaceError("the guest's change report has no entries")
    entries = {_check(p): e for p, e in raw.items()}
    present = {p: e for p, e in entries.items() if e.get("k") in ("f", "l")}
    lower = Lower(snapshot)
    parts: list[str] = []
    for path in sorted(_paths(lower, report, entries)):
        old_state, new = lower.state(path), present.get(path)
        if _same(old_state, new):
            continue
        old = old_state[1] if old_state is not None and old_state[0] in ("f", "l") else None
        data: bytes | None = None
        binary = False
        if new is not None and new["k"] == "l":
            data = str(new["to"]).encode()
        elif new is not None and new.get("txt") and int(new.get("n", 0)) <= TEXT_MAX:
            data = fetch(path)
            if data is not None and len(data) > TEXT_MAX:
                data, binary = None, True
        elif new is not None:
            binary = True
        parts.append(file_diff(path, old, data, binary))
    return "".join(parts)


class SnapshotSession(GuestSession):
    """A ``GuestSession`` whose ``diff`` is computed here (see the module doc)."""

    def _fetch(self, path: str) -> bytes | None:
        with contextlib.suppress(ValueError):  # became a link or left the tree meanwhile
            return self.read_file(path, TEXT_MAX + 1)
        return None

    def diff(self) -> str:
        """Every change against the snapshot, as a unified diff (``a/``/``b/`` paths)."""
        report = self._file_call({"op": "changes"})
        return workspace_diff(os.path.realpath(self.spec.snapshot), report, self._fetch)
