"""Write: tasks/ (partitioned by family), rejected/ and rollouts/ as zstd Parquet shards,
plus trajectories/ (one row per agent step) for runs with agent episodes.

Shards go under the directory given (the run's staging directory, local or remote); Beam's
file sink writes each shard to a temporary name and renames it when the bundle commits.
``pipeline.outputs.staging`` publishes the whole run at once, so a reader never sees a half-written
run.
"""

from __future__ import annotations

import apache_beam as beam
import pyarrow as pa
from apache_beam.io.parquetio import WriteToParquet

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


def _sink(prefix: str, schema: pa.Schema) -> WriteToParquet:
    return WriteToParquet(
        prefix,
        schema=schema,
        codec="zstd",
        file_name_suffix=".parquet",
        shard_name_template="-SSSSS-of-NNNNN",
        record_batch_size=1000,
    )


def _reported(row: dict[str, object], name: str) -> dict[str, object]:
    """Pass ``row`` on, reporting it to the live progress channel (no Beam counter)."""
    progress.report(name)
    return row


def family_index(row: dict[str, object], n: int) -> int:
    return FAMILIES.index(str(row["family"]))


class Write(beam.PTransform):
    """Write the three outputs of a run below ``root``; returns the written file names."""

    def __init__(self, root: str, fingerprint: str, run_id: str) -> None:
        super().__init__()
        self.root = root
        self.fingerprint = fingerprint
        self.run_id = run_id

    def expand(self, outputs: dict[str, beam.PCollection]) -> beam.PCollection:
        fp, rid = self.fingerprint, self.run_id
        outputs = {
            name: pcoll | f"Progress[{name}]" >> beam.Map(_reported, f"write.{name}")
            for name, pcoll in outputs.items()
        }
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
                )
            )
        written.append(
            outputs["rejected"]
            | "Rejected"
            >> _sink(
                fsio.join(self.root, "rejected", "part"),
                with_fingerprint(REJECTED_SCHEMA, fp, rid),
            )
        )
        written.append(
            outputs["rollouts"]
            | "Rollouts"
            >> _sink(
                fsio.join(self.root, "rollouts", "part"),
                with_fingerprint(ROLLOUTS_SCHEMA, fp, rid),
            )
        )
        if "trajectories" in outputs:  # agent runs (transforms.agent)
            written.append(
                outputs["trajectories"]
                | "Trajectories"
                >> _sink(
                    fsio.join(self.root, "trajectories", "part"),
                    with_fingerprint(TRAJECTORIES_SCHEMA, fp, rid),
                )
            )
        return tuple(written) | "Written" >> beam.Flatten()
