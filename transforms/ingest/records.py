"""What an input reader yields, ``SourceRecord``, and how a reader opens its file.

``record_of`` makes the record of a parsed value (an object, else a failure naming the JSON
type it got), ``failed`` the record of one that did not parse; ``open_bytes`` opens a local or
remote file for reading, gunzipping it when it starts with the gzip magic bytes.
"""

from __future__ import annotations

import gzip
from dataclasses import dataclass
from typing import IO, Any

from tasksieve.schemas.validation import JSON_TYPES
from tasksieve.transforms.runtime import fsio

_GZIP_MAGIC = b"\x1f\x8b"


@dataclass(frozen=True)
class SourceRecord:
    """One input record: where it came from, the parsed object or why it did not parse."""

    source_file: str
    line: int
    data: dict[str, Any] | None
    error: str | None
    raw: str
    whole_file: bool = False
    """The error is about the file as a whole (it could not be read on from ``line``)."""


def json_type_name(value: Any) -> str:
    """Name a parsed value's JSON type ("object", "array", "string", ...)."""
    return JSON_TYPES.get(type(value), type(value).__name__)


def record_of(path: str, line: int, value: Any, raw: str) -> SourceRecord:
    """The record of a parsed value: an object is data, anything else an error."""
    if isinstance(value, dict):
        return SourceRecord(path, line, value, None, raw)
    msg = f"expected a JSON object, got {json_type_name(value)}"
    return SourceRecord(path, line, None, msg, raw)


def failed(path: str, line: int, error: str, raw: str) -> SourceRecord:
    """The record of a value that did not parse, with why."""
    return SourceRecord(path, line, None, error, raw)


class _Gunzip(gzip.GzipFile):
    """A GzipFile that also closes the stream it reads from."""

    def __init__(self, inner: IO[bytes]) -> None:
        super().__init__(fileobj=inner, mode="rb")
        self.inner = inner

    def close(self) -> None:
        try:
            super().close()
        finally:
            self.inner.close()


def open_bytes(path: str) -> IO[bytes]:
    """Open a file for binary reading, transparently gunzipping when it starts gzip-magic."""
    if fsio.is_remote(path):
        f = fsio.open_read(path)
        magic = f.read(2)
        f.seek(0)
        return _Gunzip(f) if magic == _GZIP_MAGIC else f  # type: ignore[return-value]
    with open(path, "rb") as probe:
        magic = probe.read(2)
    if magic == _GZIP_MAGIC:
        return gzip.GzipFile(path, "rb")  # type: ignore[return-value]
    return open(path, "rb")
