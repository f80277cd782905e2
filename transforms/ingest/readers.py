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
``tasksieve.transforms.ingest.files``, the record type in ``tasksieve.transforms.ingest.records``
and the ``.json`` reader in ``tasksieve.transforms.ingest.json_values``. Remote ``*.arrow``
files are read into memory whole (Arrow IPC needs random access); the other formats stream as
they do locally.

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
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tasksieve.transforms.ingest.files import InputError, dataset_files, input_format
from tasksieve.transforms.ingest.json_values import iter_json
from tasksieve.transforms.ingest.records import SourceRecord, failed, open_bytes, record_of
from tasksieve.transforms.runtime import fsio

_BATCH_ROWS = 1024


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
        return failed(path, lineno, msg, text.decode("utf-8", "backslashreplace"))
    try:
        value = json.loads(decoded)
    except json.JSONDecodeError as e:
        return failed(path, lineno, f"invalid JSON: {e.msg} at column {lead + e.colno}", decoded)
    return record_of(path, lineno, value, decoded)


def _iter_jsonl(path: str) -> Iterator[SourceRecord]:
    with open_bytes(path) as f:
        for lineno, raw in enumerate(f, 1):
            rec = _jsonl_record(path, lineno, raw)
            if rec is not None:
                yield rec


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
    "json": iter_json,
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
