"""Streaming readers for candidate task files: JSONL, JSON, Parquet and saved `datasets` dirs.

Every reader yields one ``SourceRecord`` per record and keeps memory flat in the file size:
JSONL is read line by line (plain or gzip, gzip detected by its magic bytes), JSON by an
incremental ``raw_decode`` over a buffer filled in chunks, Parquet by row batches, and the
``*.arrow`` files of a ``datasets.save_to_disk`` directory by Arrow IPC record batches.

A record that does not parse is still yielded, with ``data=None`` and an ``error`` naming the
problem and its column, so one bad line never stops a file. Every record keeps its text whole
in ``raw`` (JSON/JSONL: the record's own text without surrounding whitespace; Parquet/Arrow:
the row as JSON), so a rejected record can be fixed and read in again; bytes that are not
UTF-8 are the exception, shown as ``\\xNN`` escapes. Problems with the file as a whole
(missing, unreadable, corrupt Parquet/Arrow/gzip, a JSON array that is never closed) raise
``InputError`` with a message that names the path.

Paths may be remote (``gs://``, ``s3://``, ... through Beam's FileSystems, see
``tasksieve.transforms.runtime.fsio``); finding the files of a directory, prefix or glob is in
``tasksieve.transforms.ingest.files`` (re-exported here). Remote ``*.arrow`` files are read into
memory whole (Arrow IPC needs random access); the other formats stream as they do locally.

Not guarded against: a single record (line or array element) is held in memory whole, so a
multi-gigabyte line costs that much; JSON strings may decode to lone surrogates
(``"\\udc80"``), which are passed through. In Parquet/Arrow input a null struct field means
"absent" (a struct column gives every row every field), so null values inside objects are
dropped before validation.
"""

from __future__ import annotations

import codecs
import gzip
import json
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from tasksieve.schemas.validation import JSON_TYPES
from tasksieve.transforms.ingest.files import InputError, dataset_files, expand_inputs, input_format
from tasksieve.transforms.runtime import fsio

__all__ = [
    "InputError",
    "SourceRecord",
    "expand_inputs",
    "input_format",
    "iter_source_records",
    "json_type_name",
]

_CHUNK = 1 << 16
_BATCH_ROWS = 1024
_GZIP_MAGIC = b"\x1f\x8b"
_BOM = "\ufeff"


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


# ---------------------------------------------------------------- record helpers


def json_type_name(value: Any) -> str:
    """Name a parsed value's JSON type ("object", "array", "string", ...)."""
    return JSON_TYPES.get(type(value), type(value).__name__)


def _record(path: str, line: int, value: Any, raw: str) -> SourceRecord:
    if isinstance(value, dict):
        return SourceRecord(path, line, value, None, raw)
    msg = f"expected a JSON object, got {json_type_name(value)}"
    return SourceRecord(path, line, None, msg, raw)


def _failed(path: str, line: int, error: str, raw: str) -> SourceRecord:
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


def _open_bytes(path: str) -> IO[bytes]:
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


# ---------------------------------------------------------------- JSONL
def _jsonl_record(path: str, lineno: int, raw: bytes) -> SourceRecord | None:
    text = raw.strip()
    if lineno == 1 and text.startswith(codecs.BOM_UTF8):
        text = text[len(codecs.BOM_UTF8) :].lstrip()
    if not text:
        return None
    lead = len(raw) - len(raw.lstrip())
    try:
        decoded = text.decode("utf-8")
    except UnicodeDecodeError as e:
        byte = text[e.start]
        msg = f"not UTF-8 (byte 0x{byte:02x} at column {lead + e.start + 1})"
        return _failed(path, lineno, msg, text.decode("utf-8", "backslashreplace"))
    try:
        value = json.loads(decoded)
    except json.JSONDecodeError as e:
        return _failed(path, lineno, f"invalid JSON: {e.msg} at column {lead + e.colno}", decoded)
    return _record(path, lineno, value, decoded)


def _iter_jsonl(path: str) -> Iterator[SourceRecord]:
    with _open_bytes(path) as f:
        for lineno, raw in enumerate(f, 1):
            rec = _jsonl_record(path, lineno, raw)
            if rec is not None:
                yield rec


# ---------------------------------------------------------------- JSON (array or values)
_WS = re.compile(r"[ \t\r\n]*")
_SURROGATE = re.compile("[\udc80-\udcff]")
_IN_STRING = re.compile(r'["\\]')
_OUTSIDE = re.compile(r'["\[\]{},\n]')


def _clean(text: str) -> str:
    """Turn bytes smuggled in as surrogates back into visible ``\\xNN`` escapes."""
    if not _SURROGATE.search(text):
        return text
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _ends_value(ch: str, in_array: bool, consumed: bool) -> bool:
    """Whether ``ch`` at bracket depth 0 ends a malformed value being skipped."""
    return ch in ",]" if in_array else (ch == "\n" and consumed)


class _JsonStream:
    """A text buffer over a byte stream, filled in chunks, with absolute line numbers."""

    def __init__(self, f: IO[bytes], path: str) -> None:
        self.f, self.path = f, path
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="surrogateescape")
        self.buf = ""
        self.pos = 0
        self.eof = False
        self.line = 1  # line number of buf[self.mark]
        self.mark = 0
        self.col_base = 0  # characters of buf[0]'s line that were dropped by compact()
        self.raw_decode = json.JSONDecoder().raw_decode

    def more(self) -> bool:
        """Append the next chunk (bigger when the buffer is big); False at end of file."""
        if self.eof:
            return False
        data = self.f.read(max(_CHUNK, len(self.buf) - self.pos))
        if not data:
            self.eof = True
            self.buf += self.decoder.decode(b"", final=True)
            return False
        self.buf += self.decoder.decode(data)
        return True

    def line_at(self, pos: int) -> int:
        """Absolute line of buffer position ``pos`` (positions must not go backwards)."""
        self.line += self.buf.count("\n", self.mark, pos)
        self.mark = pos
        return self.line

    def where(self, start: int, start_line: int, pos: int) -> str:
        """'line L column C' of buffer position ``pos``, given the line of ``start``."""
        line = start_line + self.buf.count("\n", start, pos)
        nl = self.buf.rfind("\n", 0, pos)
        col = pos - nl if nl >= 0 else pos + 1 + self.col_base
        return f"line {line} column {col}"

    def here(self) -> str:
        """'line L column C' of the current position."""
        return self.where(self.pos, self.line_at(self.pos), self.pos)

    def compact(self) -> None:
        """Drop consumed text once it is large, keeping line and column bookkeeping."""
        if self.pos < _CHUNK:
            return
        self.line_at(self.pos)
        nl = self.buf.rfind("\n", 0, self.pos)
        self.col_base = self.col_base + self.pos if nl < 0 else self.pos - nl - 1
        self.buf = self.buf[self.pos :]
        self.mark -= self.pos
        self.pos = 0

    def peek(self) -> str:
        """Skip whitespace and return the next character ("" at end of file)."""
        while True:
            self.pos = _WS.match(self.buf, self.pos).end()  # type: ignore[union-attr]
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self.more():
                return ""

    def element(self, in_array: bool, pending: str | None) -> SourceRecord:
        """Decode one value at the current position into a record; resync after a bad one."""
        self.compact()
        start = self.pos
        line = self.line_at(start)
        while True:
            try:
                value, end = self.raw_decode(self.buf, start)
            except json.JSONDecodeError as e:
                near_end = e.pos >= len(self.buf) - 8 or e.msg.startswith("Unterminated")
                if near_end and self.more():
                    continue
                where = self.where(start, line, e.pos)
                return self._skip_bad(start, line, f"invalid JSON: {e.msg} at {where}", in_array)
            if end >= len(self.buf) and self.more():
                continue  # a number or literal may go on in the next chunk
            break
        self.pos = end
        text = self.buf[start:end]
        bad = _SURROGATE.search(text)
        if bad:
            byte = ord(bad.group()) - 0xDC00
            where = self.where(start, line, start + bad.start())
            msg = f"not UTF-8 (byte 0x{byte:02x} at {where})"
            return _failed(self.path, line, msg, _clean(text))
        if pending:
            return _failed(self.path, line, pending, text)
        return _record(self.path, line, value, text)

    def _skip_bad(self, start: int, line: int, error: str, in_array: bool) -> SourceRecord:
        """Skip a malformed value (brackets and strings tracked) and return it as a failure."""
        depth, pos, in_str = 0, start, False
        while True:
            pattern = _IN_STRING if in_str else _OUTSIDE
            m = pattern.search(self.buf, pos)
            if m is None:
                if not self.more():
                    pos = len(self.buf)
                    break
                continue
            ch, pos = m.group(), m.start()
            if in_str:
                if ch == "\\":
                    if pos + 1 >= len(self.buf) and self.more():
                        continue
                    pos += 2
                    continue
                in_str, pos = False, pos + 1
            elif ch == '"':
                in_str, pos = True, pos + 1
            elif ch in "[{":
                depth, pos = depth + 1, pos + 1
            elif ch in "]}" and depth > 0:
                depth, pos = depth - 1, pos + 1
                if depth == 0 and not in_array:
                    break
            elif depth == 0 and _ends_value(ch, in_array, pos > start):
                break
            else:
                pos += 1
        if pos == start and not in_array:
            pos = start + 1  # always make progress outside arrays
        self.pos = min(pos, len(self.buf))
        # whitespace up to the delimiter that ended the value is not part of the record
        return _failed(self.path, line, error, _clean(self.buf[start : self.pos].rstrip(" \t\r\n")))


def _iter_json(path: str) -> Iterator[SourceRecord]:
    with _open_bytes(path) as f:
        s = _JsonStream(f, path)
        c = s.peek()
        if c == _BOM:
            s.pos += 1
            c = s.peek()
        if c != "[":  # one object, or several back to back (JSON Lines saved as .json)
            while c:
                yield s.element(False, None)
                c = s.peek()
            return
        s.pos += 1
        if s.peek() == "]":
            s.pos += 1
            _expect_end(s)
            return
        pending: str | None = None
        while True:
            yield s.element(True, pending)
            pending = None
            c = s.peek()
            if c == ",":
                s.pos += 1
                nxt = s.peek()
                if nxt == "":
                    raise InputError(f"{path}: JSON array is not closed with ']' (truncated file?)")
                if nxt == "]":
                    raise InputError(f"{path}: invalid JSON array: ',' before ']' at {s.here()}")
            elif c == "]":
                s.pos += 1
                _expect_end(s)
                return
            elif c == "":
                raise InputError(f"{path}: JSON array is not closed with ']' (truncated file?)")
            else:
                pending = f"invalid JSON: missing ',' before {s.here()}"


def _expect_end(s: _JsonStream) -> None:
    if s.peek():
        raise InputError(f"{s.path}: unexpected data after the JSON array at {s.here()}")


# ---------------------------------------------------------------- Parquet and Arrow
def _drop_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_nulls(v) for v in value]
    return value


def _row_record(path: str, row: int, item: dict[str, Any]) -> SourceRecord:
    data = _drop_nulls(item)
    raw = json.dumps(data, ensure_ascii=False, default=str)
    return SourceRecord(path, row, data, None, raw)


def _iter_parquet(path: str) -> Iterator[SourceRecord]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(fsio.open_read(path) if fsio.is_remote(path) else path)
    except (pa.ArrowException, OSError) as e:
        raise InputError(f"{path}: not a readable Parquet file ({e})") from None
    row = 0
    try:
        for batch in pf.iter_batches(batch_size=_BATCH_ROWS):
            for item in batch.to_pylist(maps_as_pydicts="lossy"):
                row += 1
                yield _row_record(path, row, item)
    except (pa.ArrowException, OSError) as e:
        raise InputError(f"{path}: corrupt Parquet data after row {row} ({e})") from None


def _iter_arrow(path: str) -> Iterator[SourceRecord]:
    import pyarrow as pa

    row = 0
    try:
        opened = pa.BufferReader(fsio.read_bytes(path)) if fsio.is_remote(path) else None
        with opened or pa.memory_map(path) as src:
            try:
                batches: Any = pa.ipc.open_stream(src)
            except pa.ArrowInvalid:
                src.seek(0)
                file_reader = pa.ipc.open_file(src)
                batches = (file_reader.get_batch(i) for i in range(file_reader.num_record_batches))
            for batch in batches:
                for item in batch.to_pylist(maps_as_pydicts="lossy"):
                    row += 1
                    yield _row_record(path, row, item)
    except (pa.ArrowException, OSError) as e:
        raise InputError(f"{path}: not a readable Arrow file (after row {row}: {e})") from None


def _iter_dataset(path: str) -> Iterator[SourceRecord]:
    p = Path(path)
    if fsio.is_remote(path) or not p.is_dir():
        yield from _iter_arrow(path)
        return
    for file in dataset_files(p):
        yield from _iter_arrow(file)


_READERS = {
    "jsonl": _iter_jsonl,
    "json": _iter_json,
    "parquet": _iter_parquet,
    "arrow-dataset": _iter_dataset,
}


def iter_source_records(path: str) -> Iterator[SourceRecord]:
    """Stream the records of one input file (or saved datasets dir); memory stays flat.

    Raises InputError for a missing, unreadable or corrupt file; records that do not parse
    are yielded with ``data=None`` and an ``error``. An empty file yields nothing.
    """
    reader = _READERS[input_format(path)]
    try:
        yield from reader(path)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except (EOFError, zlib.error, gzip.BadGzipFile) as e:
        raise InputError(f"{path}: corrupt or truncated gzip data ({e})") from None
    except OSError as e:
        raise InputError(f"{path}: cannot read ({e.strerror or e})") from None
