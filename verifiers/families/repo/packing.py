"""Trees packed as ``Sandbox.run`` input files: a snapshot (under ``snap/``) or an environment.

``Sandbox.run`` takes a dict of files, so this path works on every backend, the remote service
included, at the price of sending the tree with every run; ``MAX_PACKED_BYTES`` and
``MAX_PACKED_FILES`` bound it (a workspace backend mounts the tree instead, with no limit here).
Symlinks cannot travel as files: they are returned apart, as (path, target), and the guest
recreates them. Packs are cached per tree (a few, least recently used first out).
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

MAX_PACKED_BYTES = 64 * 1024 * 1024
MAX_PACKED_FILES = 20_000
_SKIP = frozenset({"__pycache__", ".git", ".pytest_cache"})


class PackTooLarge(Exception):
    """A tree is over the packed-run limits; the message says by how much and what to do."""


@dataclass(frozen=True)
class Pack:
    """A tree as input files (``prefix/<rel>`` -> bytes) plus its symlinks and byte size."""

    files: dict[str, bytes]
    links: dict[str, str]
    size: int


def pack_tree(root: Path, prefix: str, max_bytes: int = MAX_PACKED_BYTES) -> Pack:
    """Every regular file and symlink under ``root`` (caches and ``.git`` left out)."""
    files: dict[str, bytes] = {}
    links: dict[str, str] = {}
    size = 0
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        kept = []
        for d in sorted(dirnames):
            if d in _SKIP:
                continue
            if (here / d).is_symlink():
                filenames.append(d)
            else:
                kept.append(d)
        dirnames[:] = kept
        for name in sorted(filenames):
            p = here / name
            rel = p.relative_to(root).as_posix()
            if p.is_symlink():
                links[rel] = os.readlink(p)
                continue
            if not p.is_file():
                continue
            data = p.read_bytes()
            size += len(data)
            if size > max_bytes or len(files) >= MAX_PACKED_FILES:
                raise PackTooLarge(
                    f"{root}: over {max_bytes} bytes or {MAX_PACKED_FILES} files, the limit of "
                    "a packed run; use a sandbox with workspaces (it mounts the tree) or a "
                    "smaller repository"
                )
            files[f"{prefix}/{rel}"] = data
    return Pack(files, links, size)


class PackCache:
    """The last few packs, keyed by (tree, prefix); thread-safe."""

    def __init__(self, keep: int = 4, max_bytes: int = MAX_PACKED_BYTES) -> None:
        self.keep = keep
        self.max_bytes = max_bytes
        self._packs: OrderedDict[tuple[str, str], Pack] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, root: Path, prefix: str) -> Pack:
        key = (str(root), prefix)
        with self._lock:
            if key in self._packs:
                self._packs.move_to_end(key)
                return self._packs[key]
        pack = pack_tree(root, prefix, self.max_bytes)
        with self._lock:
            self._packs[key] = pack
            while len(self._packs) > self.keep:
                self._packs.popitem(last=False)
        return pack
