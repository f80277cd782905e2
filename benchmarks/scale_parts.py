"""Two host-stage costs measured apart, old way against new, in one process, interleaved.

    PYTHONPATH=. .venv/bin/python -m benchmarks.scale_parts TASKS_DIR [--items 5000] [--rounds 3]

On the records of a scale corpus (``benchmarks.scale_corpus``, e.g. ``DIR/corpus-10000/tasks``
of a ``benchmarks.scale`` run):

- **Item encoding**: an ``Item`` through Beam's coder (as at every stage boundary of the
  in-memory runner) now (``Item.__reduce__``: the task as ``model_dump()`` data) against the
  dataclass as it was pickled before (its ``__dict__`` with the task's pydantic models and
  their state, as pickle's default for a class without ``__reduce__`` writes it):
  microseconds to encode and to decode, and bytes.
- **Rows to Arrow**: rows of the rejected schema into the Arrow tables the Parquet sink
  writes, with Beam's ``WriteToParquet`` converter (``_RowDictionariesToArrowTable``: per row,
  per field, into Python lists) against ``transforms.write.RowsToTables``
  (``RecordBatch.from_pylist`` per 1,000 rows); the two tables must be equal.

Each round times old and new back to back and the best round of each is kept, so a loaded
machine slows both alike; the ratios are what to read. The load before and after is printed.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections.abc import Callable
from typing import Any

import pyarrow as pa
from apache_beam.coders import registry
from apache_beam.io.parquetio import _RowDictionariesToArrowTable
from apache_beam.transforms.window import GlobalWindow

from benchmarks.scale_stages import survivor_row
from benchmarks.timing import command_line, run_reported
from tasksieve.schemas.arrow import REJECTED_SCHEMA
from tasksieve.schemas.validation import validate_record
from tasksieve.transforms.ingest.files import expand_inputs
from tasksieve.transforms.ingest.readers import iter_source_records
from tasksieve.transforms.runtime.items import Item, canonical_json, sha256_text
from tasksieve.transforms.write import RowsToTables


def load_items(tasks: str, limit: int) -> list[Item]:
    out: list[Item] = []
    for path in expand_inputs((tasks,)):
        for rec in iter_source_records(path):
            task = None if rec.data is None else validate_record(path, rec.line, rec.data)[0]
            if task is not None:
                digest = sha256_text(canonical_json(rec.data))
                out.append(Item(task, rec.source_file, rec.line, digest, raw=rec.raw))
            if len(out) >= limit:
                return out
    return out


class _AsBefore:
    """Pickles an ``Item`` as the plain dataclass did (no ``__reduce__``)."""

    def __init__(self, item: Item) -> None:
        self.item = item

    def __reduce__(self) -> Any:
        return (_item_with, (self.item.__dict__,))


def _item_with(state: dict[str, Any]) -> Item:
    item = Item.__new__(Item)
    item.__dict__.update(state)
    return item


def best_of(rounds: int, fn: Callable[[], Any]) -> tuple[float, Any]:
    """The shortest of ``rounds`` calls (each after a full collection, the previous round's
    result dropped first) and the last result."""
    best, got = float("inf"), None
    for _ in range(rounds):
        got = None
        gc.collect()
        t0 = time.perf_counter()
        got = fn()
        best = min(best, time.perf_counter() - t0)
    return best, got


def encoding(items: list[Item], rounds: int) -> list[str]:
    coder = registry.get_coder(Item)
    old = [_AsBefore(it) for it in items]
    n, lines = len(items), []
    enc_old, blobs_old = best_of(rounds, lambda: [coder.encode(o) for o in old])
    enc_new, blobs_new = best_of(rounds, lambda: [coder.encode(it) for it in items])
    dec_old, back = best_of(rounds, lambda: [coder.decode(b) for b in blobs_old])
    assert back == items, "an Item did not come back equal"
    del back
    dec_new, back = best_of(rounds, lambda: [coder.decode(b) for b in blobs_new])
    assert back == items, "an Item did not come back equal"
    size_old = sum(map(len, blobs_old)) / n
    size_new = sum(map(len, blobs_new)) / n
    lines.append("| Item through Beam's coder | before | now | now / before |")
    lines.append("|---|---|---|---|")
    for name, a, b in (
        ("encode, us per Item", 1e6 * enc_old / n, 1e6 * enc_new / n),
        ("decode, us per Item", 1e6 * dec_old / n, 1e6 * dec_new / n),
        ("bytes per Item", size_old, size_new),
    ):
        lines.append(f"| {name} | {a:,.1f} | {b:,.1f} | {b / a:.2f}x |")
    return lines


def _beam_tables(rows: list[dict[str, Any]]) -> list[pa.Table]:
    fn = _RowDictionariesToArrowTable(REJECTED_SCHEMA, record_batch_size=1000)
    out = [t for row in rows for t in fn.process(row, w=GlobalWindow())]
    return out + [wv.value for wv in fn.finish_bundle()]


def _our_tables(rows: list[dict[str, Any]]) -> list[pa.Table]:
    fn = RowsToTables(REJECTED_SCHEMA, "bench")
    fn.start_bundle()
    out = [t for row in rows for t in fn.process(row)]
    return out + [wv.value for wv in fn.finish_bundle()]


def rows_to_arrow(items: list[Item], rounds: int) -> list[str]:
    rows = [survivor_row(it, "bench") for it in items]
    old_s, old = best_of(rounds, lambda: _beam_tables(rows))
    new_s, new = best_of(rounds, lambda: _our_tables(rows))
    assert pa.concat_tables(old).equals(pa.concat_tables(new)), "the tables differ"
    n = len(rows)
    return [
        "| rows to Arrow tables | Beam's WriteToParquet | RowsToTables | now / before |",
        "|---|---|---|---|",
        f"| us per row | {1e6 * old_s / n:,.1f} | {1e6 * new_s / n:,.1f} | {new_s / old_s:.2f}x |",
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("tasks", help="a scale corpus's tasks directory")
    ap.add_argument("--items", type=int, default=5000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    print(command_line("benchmarks.scale_parts"))
    items = load_items(args.tasks, args.items)
    print(f"{len(items):,} items, best of {args.rounds} rounds\n")
    print("\n".join(encoding(items, args.rounds)) + "\n")
    print("\n".join(rows_to_arrow(items, args.rounds)))
    return 0


if __name__ == "__main__":
    sys.exit(run_reported(main))
