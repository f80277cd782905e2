"""Write: tasks/ (partitioned by family), rejected/ and rollouts/ as zstd Parquet shards,
plus trajectories/ (one row per agent step) for runs with agent episodes.

Shards go under the directory given (the run's staging directory, local or remote); Beam's
file sink writes each shard to a temporary name and renames it when the bundle commits.
``pipeline.outputs.staging`` publishes the whole run at once, so a reader never sees a half-written
run.

Rows reach the sink as Arrow tables built by ``RowsToTables``: it keeps a bundle's row dicts
and turns every ``BATCH_ROWS`` of them into one record batch with ``RecordBatch.from_pylist``
(Arrow's own loop), where Beam's ``WriteToParquet`` appends each row to per-column lists field
by field in Python first, several times the cost per row. The progress channel is told per
batch, in the same step. The files written hold the same rows as before.
"""

from __future__ import annotations

from collections.abc import Iterator

import apache_beam as beam
import pyarrow as pa
from apache_beam.io.parquetio import WriteToParquetBatched
from apache_beam.transforms.window import GlobalWindows
from apache_beam.typehints.decorators import no_annotations
from apache_beam.utils.windowed_value import WindowedValue

from tasksieve.schemas import FAMILIES
from tasksieve.schemas.arrow import (
    REJECTED_SCHEMA,
    ROLLOUTS_SCHEMA,
    TASKS_SCHEMA,
    TRAJECTORIES_SCHEMA,
)
from tasksieve.transforms.runtime import fsio, progress


def with_fingerprint(schema: pa.Schema, fingerprint: str, run_id: str) -> pa.Schema:
    meta = dict(schema.metadata or {})
    meta[b"config_fingerprint"] = fingerprint.encode()
    meta[b"run_id"] = run_id.encode()
    return schema.with_metadata(meta)


BATCH_ROWS = 1000
"""Rows per Arrow record batch."""
TABLE_BYTES = 64 * 1024 * 1024
"""A bundle's batches are sent to the sink as one table once they hold this many bytes (and
at the bundle's end): Beam's ``WriteToParquet`` default."""


class RowsToTables(beam.DoFn):
    """Row dicts of ``schema`` -> Arrow tables, one per bundle (or per ``TABLE_BYTES``).

    Each row is reported as ``progress_name`` to the live progress channel, per batch. A row
    missing a field is written as null there (as ``Table.from_pylist`` does); a row whose
    value does not fit its column's type fails the run with Arrow's message, as it did in
    Beam's sink.
    """

    def __init__(self, schema: pa.Schema, progress_name: str) -> None:
        self.schema = schema
        self.progress_name = progress_name

    def start_bundle(self) -> None:
        self._rows: list[dict[str, object]] = []
        self._batches: list[pa.RecordBatch] = []
        self._bytes = 0

    def process(self, row: dict[str, object]) -> Iterator[pa.Table]:
        self._rows.append(row)
        if len(self._rows) >= BATCH_ROWS:
            self._flush_rows()
            if self._bytes >= TABLE_BYTES:
                yield self._take_table()

    def finish_bundle(self) -> Iterator[WindowedValue]:
        self._flush_rows()
        if self._batches:
            yield GlobalWindows.windowed_value_at_end_of_window(self._take_table())

    def _flush_rows(self) -> None:
        if not self._rows:
            return
        batch = pa.RecordBatch.from_pylist(self._rows, schema=self.schema)
        progress.report(self.progress_name, len(self._rows))
        self._rows = []
        self._batches.append(batch)
        self._bytes += batch.nbytes

    def _take_table(self) -> pa.Table:
        table = pa.Table.from_batches(self._batches, schema=self.schema)
        self._batches, self._bytes = [], 0
        return table


class _Sink(beam.PTransform):
    """Row dicts -> zstd Parquet shards ``prefix-SSSSS-of-NNNNN.parquet``; the file names."""

    def __init__(self, prefix: str, schema: pa.Schema, progress_name: str) -> None:
        super().__init__()
        self.prefix = prefix
        self.schema = schema
        self.progress_name = progress_name

    def expand(self, rows: beam.PCollection) -> beam.PCollection:
        return (
            rows
            | "ToTables" >> beam.ParDo(RowsToTables(self.schema, self.progress_name))
            | "WriteParquet"
            >> WriteToParquetBatched(
                self.prefix,
                schema=self.schema,
                codec="zstd",
                file_name_suffix=".parquet",
                shard_name_template="-SSSSS-of-NNNNN",
            )
        )


def _sink(prefix: str, schema: pa.Schema, name: str) -> _Sink:
    return _Sink(prefix, schema, f"write.{name}")


def family_index(row: dict[str, object], n: int) -> int:
    return FAMILIES.index(str(row["family"]))


class Write(beam.PTransform):
    """Write the three outputs of a run below ``root``; returns the written file names."""

    def __init__(self, root: str, fingerprint: str, run_id: str) -> None:
        super().__init__()
        self.root = root
        self.fingerprint = fingerprint
        self.run_id = run_id

    @no_annotations
    def expand(self, outputs: dict[str, beam.PCollection]) -> beam.PCollection:
        fp, rid = self.fingerprint, self.run_id
        written = []
        parts = outputs["tasks"] | "ByFamily" >> beam.Partition(
            family_index,  # type: ignore[arg-type]
            len(FAMILIES),
        )
        for fam, pcoll in zip(FAMILIES, parts, strict=True):
            written.append(
                pcoll
                | f"Tasks[{fam}]"
                >> _sink(
                    fsio.join(self.root, "tasks", fam, "part"),
                    with_fingerprint(TASKS_SCHEMA, fp, rid),
                    "tasks",
                )
            )
        written.append(
            outputs["rejected"]
            | "Rejected"
            >> _sink(
                fsio.join(self.root, "rejected", "part"),
                with_fingerprint(REJECTED_SCHEMA, fp, rid),
                "rejected",
            )
        )
        written.append(
            outputs["rollouts"]
            | "Rollouts"
            >> _sink(
                fsio.join(self.root, "rollouts", "part"),
                with_fingerprint(ROLLOUTS_SCHEMA, fp, rid),
                "rollouts",
            )
        )
        if "trajectories" in outputs:  # agent runs (transforms.agent)
            written.append(
                outputs["trajectories"]
                | "Trajectories"
                >> _sink(
                    fsio.join(self.root, "trajectories", "part"),
                    with_fingerprint(TRAJECTORIES_SCHEMA, fp, rid),
                    "trajectories",
                )
            )
        return tuple(written) | "Written" >> beam.Flatten()
