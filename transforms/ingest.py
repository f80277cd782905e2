"""Ingest: expand input patterns and stream every record, parse errors included."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import apache_beam as beam

from transforms.common import count
from transforms.sources import SourceRecord, expand_inputs, iter_source_records


def read_counted(path: str) -> Iterator[SourceRecord]:
    """Stream one file's records, counting them."""
    for rec in iter_source_records(path):
        count("ingest.records")
        yield rec


class Ingest(beam.PTransform):
    """Read every record of the given files; a record that does not parse still flows on."""

    def __init__(self, patterns: Sequence[str]) -> None:
        super().__init__()
        self.files = expand_inputs(patterns)

    def expand(self, pbegin: beam.pvalue.PBegin) -> beam.PCollection:
        return (
            pbegin
            | "Files" >> beam.Create(self.files)
            | "Read" >> beam.FlatMap(read_counted)
            | "Spread" >> beam.Reshuffle()
        )
