"""Small Beam helpers shared by the stages: counters and the rejected tag."""

from __future__ import annotations

from typing import Any

import apache_beam as beam
from apache_beam import pvalue
from apache_beam.metrics import Metrics

NAMESPACE = "tasksieve"
REJECTED = "rejected"


def count(name: str, value: int = 1) -> None:
    """Increment the Beam counter ``tasksieve:<name>`` (read back into the manifest)."""
    Metrics.counter(NAMESPACE, name).inc(value)


def rejected(row: dict[str, Any]) -> pvalue.TaggedOutput:
    """Tag a rejection row for the stage's ``rejected`` output and count its reason."""
    count(f"rejected.{row['reason']}")
    return pvalue.TaggedOutput(REJECTED, row)


def flatten_rejected(*pcolls: beam.PCollection) -> beam.PCollection:
    return tuple(pcolls) | beam.Flatten()
