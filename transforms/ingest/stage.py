"""Ingest: expand input patterns and stream every record, parse errors included.

A file that cannot be read to its end (corrupt or truncated gzip, Parquet or Arrow data, a
JSON array never closed, an I/O error of the filesystem) does not fail the run: the records
read before the fault flow on as usual, and the file adds one more record, marked
``whole_file``, that Validate rejects as ``ingest.unreadable_file`` with the file name and the
reason. For conservation that record counts as one input (``ingest.records``): input ==
kept + rejected still holds, and ``ingest.unreadable_files`` counts such files. The records
after the fault are not seen, so they are not counted; fix the file and run again.
"""

from __future__ import annotations

import logging
import pickle
from collections.abc import Iterator, Sequence

import apache_beam as beam

from tasksieve.transforms.ingest.files import expand_inputs
from tasksieve.transforms.ingest.readers import iter_source_records
from tasksieve.transforms.ingest.records import SourceRecord
from tasksieve.transforms.runtime.common import count, use_progress_channel

log = logging.getLogger("tasksieve")


def read_counted(path: str) -> Iterator[SourceRecord]:
    """Stream one file's records, counting them; a fault ends the file with one error record."""
    line = 0
    try:
        for rec in iter_source_records(path):
            line = rec.line
            count("ingest.records")
            yield rec
    except Exception as exc:  # any fault of one file must not fail the run
        message = str(exc) if path in str(exc) else f"{path}: {exc}"
        log.warning("unreadable input file (rejected, run goes on): %s", message)
        count("ingest.records")
        count("ingest.unreadable_files")
        yield SourceRecord(path, line, None, message, "", whole_file=True)


class Ingest(beam.PTransform):
    """Read every record of the given files; a record that does not parse still flows on."""

    def __init__(self, patterns: Sequence[str], progress: str | None = None) -> None:
        super().__init__()
        self.files = expand_inputs(patterns)
        self.progress = progress
        """The live progress channel to name to the workers (None: none)."""

    def expand(self, pbegin: beam.pvalue.PBegin) -> beam.PCollection:
        files = pbegin | "Files" >> beam.Create(self.files)
        return (
            use_progress_channel(files, self.progress)
            | "Read" >> beam.FlatMap(read_counted)
            | "Pack" >> beam.Map(_pack)
            | "Spread" >> beam.Reshuffle()
            | "Unpack" >> beam.Map(_unpack)
        )


def _pack(rec: SourceRecord) -> bytes:
    """A record as one pickled value for the shuffle: the in-memory runner holds every value of
    a GroupByKey decoded until the group is read, and a record's parsed object there takes
    about three times the memory of its pickle."""
    return pickle.dumps(rec, protocol=pickle.HIGHEST_PROTOCOL)


def _unpack(blob: bytes) -> SourceRecord:
    rec: SourceRecord = pickle.loads(blob)
    return rec
