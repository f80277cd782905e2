"""Compaction of the near-dedup index: many small parts (one per run) merged into one.

Every curate run with ``--dedup-index`` and every ``dedup-index add`` adds a part, so an
index fed for months holds thousands of small files, each opened by every worker that loads
it. ``compact_index`` merges them into one part (rows with the same ``id`` and ``source``
kept once), writes it before deleting the parts it read, and leaves ``index.json`` alone. A
crash between the two leaves the rows twice (loaded once: duplicate ids are dropped at
lookup), never loses one. Parts added by another run while it compacts are not touched.
``maybe_compact`` does it once an index has more than ``COMPACT_AFTER`` parts; curate calls it
after adding its kept tasks, ``tasksieve dedup-index compact`` on demand.
What it does NOT do: lock against two compactions of one index at the same time (each
writes a merged part; the rows are then held twice until the next compaction).
"""

from __future__ import annotations

import datetime as dt
import io
import secrets

from apache_beam.io.filesystems import FileSystems

from tasksieve.transforms.dedup.index_store import INDEX_META, index_files

COMPACT_AFTER = 32


def compact_index(path: str, min_parts: int = 2) -> tuple[int, int, str]:
    """Merge the parts of the index at ``path`` when it has at least ``min_parts``.

    Returns (parts merged, rows in the merged part, its file); (0, 0, "") when nothing was
    done. Raises ValueError for a directory that is not an index.
    """
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    parts = index_files(path)
    if parts and not FileSystems.exists(FileSystems.join(path, INDEX_META)):
        raise ValueError(f"{path}: dedup index has parts but no {INDEX_META}")
    if len(parts) < max(2, min_parts):
        return 0, 0, ""
    tables = []
    for part in parts:
        with FileSystems.open(part) as f:
            tables.append(pq.read_table(io.BytesIO(f.read())))
    table = pa.concat_tables(tables, promote_options="default")
    keyed = pc.binary_join_element_wise(table["id"], table["source"], "\x00")
    _, first = _first_of_each(keyed.to_pylist())
    table = table.take(pa.array(first, pa.int64()))
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S")
    out = FileSystems.join(path, f"part-compacted-{stamp}-{secrets.token_hex(4)}.parquet")
    buf = io.BytesIO()
    pq.write_table(table, buf, compression="zstd")
    with FileSystems.create(out) as f:
        f.write(buf.getvalue())
    FileSystems.delete(parts)
    return len(parts), table.num_rows, out


def _first_of_each(keys: list[str | None]) -> tuple[int, list[int]]:
    """How many distinct keys, and the row of each one's first occurrence, in order."""
    seen: set[str | None] = set()
    rows = []
    for i, k in enumerate(keys):
        if k not in seen:
            seen.add(k)
            rows.append(i)
    return len(seen), rows


def maybe_compact(path: str, after: int = COMPACT_AFTER) -> int:
    """Compact the index when it holds more than ``after`` parts; the parts merged (0: none)."""
    if len(index_files(path)) <= after:
        return 0
    return compact_index(path)[0]
