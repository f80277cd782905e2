"""Finding input files: expand files, directories and globs, local or remote, to a file list.

A directory (remote: a key prefix) is walked recursively, skipping hidden entries and files
without a supported suffix; a saved ``datasets`` directory expands to its ``*.arrow`` files.
Remote paths (``gs://``, ``s3://``, ...) are listed and matched through Beam's FileSystems
(``tasksieve.transforms.runtime.fsio``); local ones with the standard library, as before.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Sequence
from pathlib import Path

from tasksieve.transforms.runtime import fsio

_DATASET_MARKERS = ("dataset_info.json", "state.json")
_SUFFIXES: tuple[tuple[str, str], ...] = (
    (".jsonl.gz", "jsonl"),
    (".ndjson.gz", "jsonl"),
    (".json.gz", "json"),
    (".jsonl", "jsonl"),
    (".ndjson", "jsonl"),
    (".json", "json"),
    (".gz", "jsonl"),
    (".parquet", "parquet"),
    (".arrow", "arrow-dataset"),
)
_WALKED = (".jsonl", ".jsonl.gz", ".ndjson", ".ndjson.gz", ".json", ".json.gz", ".parquet")
_SUPPORTED = "*.jsonl[.gz], *.ndjson[.gz], *.json[.gz], *.parquet, *.arrow or a datasets dir"


class InputError(Exception):
    """A user mistake with the input: missing path, unreadable file, unsupported format."""


def _name_format(name: str) -> str | None:
    lower = name.lower()
    for suffix, fmt in _SUFFIXES:
        if lower.endswith(suffix):
            return fmt
    return None


def _is_dataset_dir(path: Path) -> bool:
    return any((path / m).is_file() for m in _DATASET_MARKERS) and any(path.glob("*.arrow"))


def input_format(path: str) -> str:
    """Return "jsonl", "json", "parquet" or "arrow-dataset" for a path, or raise InputError."""
    p = Path(path)
    if not fsio.is_remote(path) and p.is_dir():
        if _is_dataset_dir(p):
            return "arrow-dataset"
        raise InputError(f"{path}: directory is not a saved datasets dataset")
    fmt = _name_format(fsio.basename(path))
    if fmt is None:
        raise InputError(f"{path}: unsupported format (expected {_SUPPORTED})")
    return fmt


def dataset_files(path: Path) -> list[str]:
    """The ``*.arrow`` files of a saved ``datasets`` directory, sorted."""
    return sorted(str(f) for f in path.glob("*.arrow") if f.is_file())


def _walked(name: str) -> bool:
    return name != "dataset_dict.json" and name.lower().endswith(_WALKED)


def _walk(root: Path) -> list[str]:
    """Supported files under a directory; hidden entries and dataset metadata are skipped."""
    if _is_dataset_dir(root):
        return dataset_files(root)
    found: list[str] = []
    for entry in sorted(root.iterdir()):
        if entry.name.startswith("."):
            continue
        if entry.is_dir():
            found.extend(_walk(entry))
        elif entry.is_file() and _walked(entry.name):
            found.append(str(entry))
    return found


def _hidden_below(path: str, root: str) -> bool:
    return any(part.startswith(".") for part in fsio.relative(path, root).split("/"))


def _walk_remote(root: str) -> list[str]:
    """Supported files below a remote prefix, as :func:`_walk` finds them locally."""
    files = [f for f in fsio.list_files(root) if not _hidden_below(f, root)]
    names = {fsio.relative(f, root) for f in files}
    if any(m in names for m in _DATASET_MARKERS):
        arrow = [f for f in files if "/" not in fsio.relative(f, root) and f.endswith(".arrow")]
        if arrow:
            return arrow
    return [f for f in files if _walked(fsio.basename(f))]


def _expand_remote(pattern: str) -> list[str]:
    if fsio.has_magic(pattern):
        matches = fsio.match(pattern)
        if not matches:
            raise InputError(f"{pattern}: matches no files")
        found = [m for m in matches if _name_format(fsio.basename(m)) is not None]
        if not found:
            raise InputError(f"{pattern}: matches no supported input files ({_SUPPORTED})")
        return found
    if _name_format(fsio.basename(pattern)) is not None and fsio.is_file(pattern):
        return [pattern]
    found = _walk_remote(pattern)
    if found:
        return found
    if fsio.list_files(pattern):
        raise InputError(f"{pattern}: directory holds no supported input files ({_SUPPORTED})")
    raise InputError(f"{pattern}: no such file or directory")


def _expand_one(pattern: str) -> list[str]:
    if fsio.is_remote(pattern):
        return _expand_remote(pattern)
    if glob.has_magic(pattern):
        matches = sorted(glob.glob(pattern, recursive=True))
        if not matches:
            raise InputError(f"{pattern}: matches no files")
        found: list[str] = []
        for m in matches:
            mp = Path(m)
            if mp.is_dir():
                found.extend(_walk(mp))
            elif mp.is_file() and _name_format(mp.name) is not None:
                found.append(m)
        if not found:
            raise InputError(f"{pattern}: matches no supported input files ({_SUPPORTED})")
        return found
    p = Path(pattern)
    if not p.exists():
        raise InputError(f"{pattern}: no such file or directory")
    if p.is_dir():
        found = _walk(p)
        if not found:
            raise InputError(f"{pattern}: directory holds no supported input files ({_SUPPORTED})")
        return found
    input_format(pattern)
    return [pattern]


def expand_inputs(patterns: Sequence[str]) -> list[str]:
    """Expand files, directories (recursively) and globs (``**`` too) to a sorted file list.

    A saved ``datasets`` directory expands to its ``*.arrow`` files. Files a glob or directory
    matches but that have no supported suffix are skipped; a file named explicitly must have
    one. Raises InputError when a pattern matches nothing or a path is missing.
    """
    if not patterns:
        raise InputError("no input paths given")
    out: set[str] = set()
    for pattern in patterns:
        out.update(f if fsio.is_remote(f) else os.path.normpath(f) for f in _expand_one(pattern))
    return sorted(out)
