"""Repository snapshots addressed by content, stored once and shared by every task built on them.

``tree_digest`` hashes what a git checkout preserves of a tree: the relative path of each regular
file and symlink, whether a file is executable, and its bytes (a symlink: its target). Empty
directories, owners, times and other mode bits do not count, so a snapshot checked out from git
or unpacked from an archive hashes the same as the tree it was made from.

A ``SnapshotStore`` keeps each tree under ``<root>/<hex>/``. ``put`` copies a tree in
(once; a second put of the same content is free) and returns its ``sha256:<hex>`` reference;
``path`` returns the stored tree after checking it still hashes to its name, so a snapshot that
was changed or damaged after it was stored is refused, never used. Stored files keep ordinary
modes (owner-writable, the executable bit as in the tree): sandboxes bind the store read-only,
and a workspace over it must show the tree as the repository has it, writable by its user.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import tempfile
from pathlib import Path

PREFIX = "sha256:"
SKIP_DIRS = frozenset({".git", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"})


class SnapshotError(Exception):
    """A snapshot is missing, does not match its hash, or cannot be stored; says which."""


def _entries(root: Path) -> list[tuple[str, Path]]:
    found: list[tuple[str, Path]] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        here = Path(dirpath)
        for d in list(dirnames):
            if (here / d).is_symlink():  # a link to a directory is hashed as a link
                filenames.append(d)
                dirnames.remove(d)
        for name in filenames:
            p = here / name
            found.append((p.relative_to(root).as_posix(), p))
    found.sort()
    return found


def tree_digest(root: str | Path) -> str:
    """``sha256:<hex>`` of the tree at ``root`` (see the module docstring for what counts)."""
    root = Path(root)
    if not root.is_dir():
        raise SnapshotError(f"{root}: not a directory")
    h = hashlib.sha256()
    for rel, p in _entries(root):
        st = p.lstat()
        if stat.S_ISLNK(st.st_mode):
            h.update(b"L\0" + rel.encode() + b"\0" + os.readlink(p).encode() + b"\0")
        elif stat.S_ISREG(st.st_mode):
            kind = b"X" if st.st_mode & 0o111 else b"F"
            fh = hashlib.sha256()
            with open(p, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    fh.update(chunk)
            h.update(kind + b"\0" + rel.encode() + b"\0" + fh.digest())
        # sockets, fifos and devices are not part of a snapshot
    return PREFIX + h.hexdigest()


def tree_size(root: str | Path) -> tuple[int, int]:
    """(files, bytes) of the tree at ``root``, counted as ``tree_digest`` sees it."""
    files = size = 0
    for _rel, p in _entries(Path(root)):
        files += 1
        size += p.lstat().st_size
    return files, size


def _hex(ref: str) -> str:
    if not ref.startswith(PREFIX) or len(ref) != len(PREFIX) + 64:
        raise SnapshotError(f"not a snapshot reference: {ref!r} (want sha256:<64 hex>)")
    hexpart = ref[len(PREFIX) :]
    if any(c not in "0123456789abcdef" for c in hexpart):
        raise SnapshotError(f"not a snapshot reference: {ref!r} (want sha256:<64 hex>)")
    return hexpart


class SnapshotStore:
    """Content-addressed trees under ``root`` (see the module docstring)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self._verified: set[str] = set()

    def put(self, tree: str | Path, max_bytes: int | None = None) -> str:
        """Store the tree at ``tree`` (once) and return its reference."""
        tree = Path(tree)
        files, size = tree_size(tree)
        if max_bytes is not None and size > max_bytes:
            raise SnapshotError(
                f"{tree}: {size} bytes in {files} files is over the snapshot limit of {max_bytes}"
            )
        ref = tree_digest(tree)
        dest = self.root / _hex(ref)
        if dest.is_dir():
            return ref
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".put-", dir=self.root))
        try:
            for rel, p in _entries(tree):
                target = tmp / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                if p.is_symlink():
                    os.symlink(os.readlink(p), target)
                else:
                    shutil.copy2(p, target)
            _normal_modes(tmp)
            if tree_digest(tmp) != ref:
                raise SnapshotError(f"{tree}: changed while it was being stored")
            try:
                os.rename(tmp, dest)
            except OSError:
                if not dest.is_dir():
                    raise
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
        return ref

    def path(self, ref: str) -> Path:
        """The stored tree for ``ref``; raises ``SnapshotError`` if missing or altered."""
        dest = self.root / _hex(ref)
        if not dest.is_dir():
            raise SnapshotError(f"snapshot {ref} is not in the store at {self.root}")
        if ref not in self._verified:
            actual = tree_digest(dest)
            if actual != ref:
                raise SnapshotError(
                    f"snapshot {ref} in {self.root} does not match its hash (found {actual}); "
                    "restore it from its source or store it again"
                )
            self._verified.add(ref)
        return dest

    def __contains__(self, ref: str) -> bool:
        try:
            return (self.root / _hex(ref)).is_dir()
        except SnapshotError:
            return False


def _normal_modes(root: Path) -> None:
    """Directories 0755, files 0644 or 0755 (executable), whatever umask the copy had."""
    for dirpath, _dirnames, filenames in os.walk(root):
        Path(dirpath).chmod(0o755)
        for name in filenames:
            p = Path(dirpath) / name
            if not p.is_symlink():
                p.chmod(0o755 if p.stat().st_mode & 0o111 else 0o644)
