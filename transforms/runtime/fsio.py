"""File access through Beam's FileSystems, so every path may be local or remote.

A path with a scheme Beam knows (``gs://``, ``s3://``, ``hdfs://``, ...) goes through
``apache_beam.io.filesystems.FileSystems`` (which must have been given the pipeline options,
e.g. ``--s3_endpoint_url``, by :func:`configure`); a local path goes through the standard
library exactly as before, so local behaviour and error messages do not change.

Remote "directories" are key prefixes: :func:`list_files` lists every object below one, and
:func:`delete_tree` deletes them. Writes of whole files (:func:`write_bytes`) go to a new
object in one upload; object stores make such an object visible whole or not at all, which is
what the publishing in ``tasksieve.pipeline.outputs.staging`` relies on.

Not guarded against: eventual listing consistency on stores that lack read-after-write
listing (GCS and S3 list consistently today; other stores may not), and concurrent writers
of the same key (the last upload wins).
"""

from __future__ import annotations

import fnmatch
import io
import os
import re
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa
    from apache_beam.io.filesystems import FileSystems
    from apache_beam.options.pipeline_options import PipelineOptions

_MAGIC = frozenset("*?[")
_SCHEME = re.compile(r"^(?P<scheme>[a-zA-Z][-a-zA-Z0-9+.]*)://")
"""A URL scheme as Beam's FileSystems.get_scheme reads it (matched here so that local paths
never import Beam: the light CLI commands validate and verify stay fast to start)."""


def _filesystems() -> type[FileSystems]:
    """Beam's FileSystems, imported on first use (only for remote paths and configure)."""
    from apache_beam.io.filesystems import FileSystems

    return FileSystems


def _uncompressed() -> str:
    from apache_beam.io.filesystem import CompressionTypes

    return str(CompressionTypes.UNCOMPRESSED)


def configure(options: PipelineOptions) -> None:
    """Give FileSystems the pipeline options (endpoints, credentials) for driver-side I/O."""
    _filesystems().set_options(options)


def is_remote(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` names a non-local filesystem (has a scheme other than ``file``)."""
    found = _SCHEME.match(str(path))
    return found is not None and found.group("scheme").lower() != "file"


def join(base: str, *parts: str) -> str:
    """Join path parts with the separator of ``base``'s filesystem."""
    if is_remote(base):
        return _filesystems().join(base.rstrip("/"), *parts)
    return os.path.join(base, *parts)


def has_magic(pattern: str) -> bool:
    """Whether ``pattern`` holds glob characters."""
    return any(c in _MAGIC for c in pattern)


def open_read(path: str) -> IO[bytes]:
    """Open ``path`` for binary reading, bytes as stored (no decompression); seekable."""
    if not is_remote(path):
        return open(path, "rb")
    return _filesystems().open(path, compression_type=_uncompressed())


def read_bytes(path: str) -> bytes:
    """The whole content of ``path``."""
    with open_read(path) as f:
        return f.read()


def read_text(path: str) -> str:
    """The whole content of ``path`` decoded as UTF-8."""
    return read_bytes(path).decode("utf-8")


def write_bytes(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` in one go (parent directories made for a local path)."""
    if not is_remote(path):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_bytes(data)
        return
    with _filesystems().create(path, compression_type=_uncompressed()) as f:
        f.write(data)


def write_text(path: str, text: str) -> None:
    """Write ``text`` as UTF-8 to ``path``."""
    write_bytes(path, text.encode("utf-8"))


def exists(path: str) -> bool:
    """Whether a file (or, locally, a directory) exists at ``path``."""
    if not is_remote(path):
        return os.path.exists(path)
    return bool(_filesystems().exists(path))


def exists_any(path: str) -> bool:
    """Whether a file or a (remote: non-empty) directory exists at ``path``."""
    if not is_remote(path):
        return os.path.exists(path)
    return is_file(path) or bool(list_files(path))


def is_file(path: str) -> bool:
    """Whether ``path`` is a file (remote: an object with exactly that key)."""
    if not is_remote(path):
        return os.path.isfile(path)
    return bool(_filesystems().exists(path))


def match(pattern: str) -> list[str]:
    """Files matching a glob ``pattern`` (``**`` crosses directories), sorted."""
    if not is_remote(pattern):
        import glob

        return sorted(f for f in glob.glob(pattern, recursive=True) if os.path.isfile(f))
    found = _filesystems().match([pattern])[0].metadata_list
    return sorted(m.path for m in found)


def list_files(root: str) -> list[str]:
    """Every file below the directory (remote: key prefix) ``root``, sorted."""
    if not is_remote(root):
        if not os.path.isdir(root):
            return []
        return sorted(str(f) for f in Path(root).rglob("*") if f.is_file())
    prefix = root.rstrip("/") + "/"
    found = _filesystems().match([prefix + "**"])[0].metadata_list
    return sorted(m.path for m in found if m.path.startswith(prefix))


def list_matching(root: str, name_glob: str) -> list[str]:
    """Files below ``root`` (at any depth) whose base name matches ``name_glob``, sorted."""
    return [f for f in list_files(root) if fnmatch.fnmatch(basename(f), name_glob)]


def list_children(root: str, name_glob: str) -> list[str]:
    """Files directly in ``root`` whose name matches ``name_glob``, sorted."""
    return [f for f in list_matching(root, name_glob) if "/" not in relative(f, root)]


def basename(path: str) -> str:
    """The last component of ``path``."""
    return path.rstrip("/").rsplit("/", 1)[-1] if is_remote(path) else os.path.basename(path)


def relative(path: str, root: str) -> str:
    """``path`` relative to ``root`` with ``/`` separators (``path`` must lie below it)."""
    if not is_remote(path):
        return Path(path).relative_to(root).as_posix()
    prefix = root.rstrip("/") + "/"
    if not path.startswith(prefix):
        raise ValueError(f"{path} is not below {root}")
    return path[len(prefix) :]


def delete_tree(root: str) -> None:
    """Delete the directory (remote: every object below the prefix) ``root``; no error if absent."""
    if not is_remote(root):
        shutil.rmtree(root, ignore_errors=True)
        return
    files = list_files(root)
    if files:
        _filesystems().delete(files)


def delete_files(paths: Sequence[str]) -> None:
    """Delete the given files; missing ones are ignored."""
    present = [p for p in paths if exists(p)]
    if not present:
        return
    if is_remote(present[0]):
        _filesystems().delete(present)
        return
    for p in present:
        os.remove(p)


def read_parquet(path: str, columns: Sequence[str] | None = None) -> pa.Table:
    """A pyarrow Table of the Parquet file at ``path`` (only ``columns`` when given)."""
    import pyarrow.parquet as pq

    if not is_remote(path):
        return pq.read_table(path, columns=list(columns) if columns else None)
    with open_read(path) as f:
        return pq.read_table(f, columns=list(columns) if columns else None)


def write_parquet(path: str, table: pa.Table, **kwargs: Any) -> None:
    """Write a pyarrow Table to ``path`` as one Parquet file (remote: one upload)."""
    import pyarrow.parquet as pq

    if not is_remote(path):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, path, **kwargs)
        return
    buf = io.BytesIO()
    pq.write_table(table, buf, **kwargs)
    write_bytes(path, buf.getvalue())
