"""The rollout cache on storage: append-only part files of checksummed JSON lines.

Layout: ``DIR/samples/part-*.jsonl.gz``, ``DIR/verdicts/part-*.jsonl.gz`` and
``DIR/detectors/part-*.jsonl.gz``. Each line is
``{"k": key, "v": value, "c": checksum}``. A worker writes one new part per batch it
produced (samples) or per bundle (verdicts), so a run that crashes keeps everything written
before the crash. All I/O goes through Beam's FileSystems, so ``DIR`` may be local or any
remote store Beam can write (gs://, s3:// with the matching extra).

Reading is forgiving: a line that is not JSON, has the wrong shape or fails its checksum,
and the rest of a truncated or unreadable part, are skipped (counted as corrupt); the
entry is then simply missed and re-computed. A part deleted while it is read (by another
run's compaction) is skipped the same way.

Growth: re-runs only add entries for keys they missed, and ``compact`` merges the parts of
a kind into one (duplicates dropped, corrupt lines left out) once there are more than
``compact_after``; nothing is ever evicted: delete the directory to start afresh.
What it does NOT do: lock against two runs compacting the same directory at the same time
(both would write a merged part; nothing is lost, one extra part remains), or bound
memory: a worker loads every entry of a kind it needs (one copy per worker process).
"""

from __future__ import annotations

import hashlib
import json
import logging
import secrets
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from apache_beam.io.filesystems import FileSystems

log = logging.getLogger("tasksieve.rollout_cache")

SAMPLES = "samples"
VERDICTS = "verdicts"
DETECTORS = "detectors"  # gate and detector outcomes (``cache.detectors``)
KINDS = (SAMPLES, VERDICTS, DETECTORS)
DEFAULT_COMPACT_AFTER = 64


@dataclass(frozen=True)
class CacheConfig:
    """Where the rollout cache lives and whether a run uses it.

    ``path`` None: beside the output directory, as ``OUTPUT.rollout-cache``.
    ``enabled`` False (``--no-cache``): nothing is read from or written to the cache.
    """

    path: str | None = None
    enabled: bool = True
    compact_after: int = DEFAULT_COMPACT_AFTER

    def __post_init__(self) -> None:
        if self.compact_after < 2:
            raise ValueError(f"compact_after must be >= 2 part files, got {self.compact_after}")
        if self.path is not None and not self.path.strip():
            raise ValueError("the rollout cache path is empty; give a directory or drop it")

    def directory(self, output: str) -> str | None:
        """The cache directory of a run writing to ``output`` (None when disabled)."""
        if not self.enabled:
            return None
        return self.path or output.rstrip("/") + ".rollout-cache"


def checksum(key: str, value: Any) -> str:
    blob = json.dumps([key, value], sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


def encode(entries: Iterable[tuple[str, Any]]) -> bytes:
    """Part-file bytes (uncompressed) for ``(key, value)`` entries."""
    lines = [
        json.dumps({"k": k, "v": v, "c": checksum(k, v)}, ensure_ascii=False, sort_keys=True)
        for k, v in entries
    ]
    return ("\n".join(lines) + "\n").encode("utf-8") if lines else b""


def decode_line(raw: bytes) -> tuple[str, Any] | None:
    """The ``(key, value)`` of one line, or None when it is corrupt."""
    try:
        row = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(row, dict) or not isinstance(row.get("k"), str) or "v" not in row:
        return None
    if row.get("c") != checksum(row["k"], row["v"]):
        return None
    return row["k"], row["v"]


def kind_dir(root: str, kind: str) -> str:
    return FileSystems.join(root, kind)


def part_files(root: str, kind: str) -> list[str]:
    """The part files of ``kind`` under ``root`` (none when the directory is new)."""
    pattern = FileSystems.join(kind_dir(root, kind), "part-*.jsonl.gz")
    try:
        found = FileSystems.match([pattern])[0].metadata_list
    except Exception:  # no such directory: Beam raises for an empty match on some stores
        return []
    return sorted(m.path for m in found)


def read_part(path: str) -> tuple[list[tuple[str, Any]], int]:
    """The good entries of one part and how many lines (or tails) were corrupt."""
    good: list[tuple[str, Any]] = []
    bad = 0
    try:
        with FileSystems.open(path) as f:
            while raw := f.readline():
                if not raw.strip():
                    continue
                entry = decode_line(raw)
                if entry is None:
                    bad += 1
                else:
                    good.append(entry)
    except Exception as exc:  # truncated gzip, vanished file, storage error: keep what we read
        bad += 1
        log.warning("rollout cache part %s unreadable after %d entries: %s", path, len(good), exc)
    return good, bad


def load(root: str, kind: str) -> tuple[dict[str, Any], int]:
    """Every good entry of ``kind`` (a later part wins a duplicate key) and the corrupt count."""
    entries: dict[str, Any] = {}
    corrupt = 0
    for path in part_files(root, kind):
        good, bad = read_part(path)
        entries.update(good)
        corrupt += bad
    return entries, corrupt


def write_part(root: str, kind: str, entries: Mapping[str, Any], prefix: str = "part") -> str:
    """Write ``entries`` as one new part of ``kind``; return its path ('' when empty)."""
    if not entries:
        return ""
    path = FileSystems.join(kind_dir(root, kind), f"{prefix}-{secrets.token_hex(8)}.jsonl.gz")
    with FileSystems.create(path) as f:  # compressed by the .gz extension
        f.write(encode(entries.items()))
    return path


def compact(root: str, kind: str, compact_after: int = DEFAULT_COMPACT_AFTER) -> int:
    """Merge the parts of ``kind`` into one when there are more than ``compact_after``.

    The merged part is written before any input part is deleted, so a crash in between
    leaves duplicates (harmless), never a loss. Returns how many parts were merged (0: none).
    """
    parts = part_files(root, kind)
    if len(parts) <= compact_after:
        return 0
    merged: dict[str, Any] = {}
    for path in parts:
        merged.update(read_part(path)[0])
    write_part(root, kind, merged, prefix="part-compacted")
    FileSystems.delete(parts)
    log.info(
        "rollout cache %s: merged %d %s parts (%d entries)", root, len(parts), kind, len(merged)
    )
    return len(parts)


def compact_all(root: str, compact_after: int = DEFAULT_COMPACT_AFTER) -> dict[str, int]:
    """``compact`` every kind; how many parts each merged."""
    return {kind: compact(root, kind, compact_after) for kind in KINDS}


def iter_keys(root: str, kind: str) -> Iterator[str]:
    """Every good key of ``kind`` (for inspection and tests)."""
    yield from load(root, kind)[0]
