"""Validate: parse each record into a TaskRecord; reject parse errors, schema errors, dup ids."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import apache_beam as beam
from apache_beam.typehints.decorators import no_annotations

from tasksieve.schemas.validation import validate_record
from tasksieve.transforms.ingest.records import SourceRecord
from tasksieve.transforms.runtime.common import REJECTED, count, rejected
from tasksieve.transforms.runtime.deadletter import Guarded
from tasksieve.transforms.runtime.items import Item, canonical_json, rejection, sha256_text


class ValidateFn(beam.DoFn):
    """SourceRecord -> Item, or a rejection naming file, line and field."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id

    def process(self, rec: SourceRecord) -> Iterator[Any]:
        if rec.whole_file:
            yield rejected(
                rejection(
                    stage="ingest",
                    reason="ingest.unreadable_file",
                    detail=f"unreadable file: {rec.error}",
                    run_id=self.run_id,
                    source_file=rec.source_file,
                    source_line=rec.line,
                )
            )
            return
        if rec.data is None:
            yield rejected(
                rejection(
                    stage="validate",
                    reason="validate.parse_error",
                    detail=f"{rec.source_file}:{rec.line}: {rec.error}",
                    run_id=self.run_id,
                    source_file=rec.source_file,
                    source_line=rec.line,
                    raw=rec.raw,
                )
            )
            return
        task, problems = validate_record(rec.source_file, rec.line, rec.data, rec.error)
        if task is None:
            rid = rec.data.get("id")
            yield rejected(
                rejection(
                    stage="validate",
                    reason="validate.schema",
                    detail="; ".join(p.format() for p in problems),
                    run_id=self.run_id,
                    source_file=rec.source_file,
                    source_line=rec.line,
                    record_id=rid if isinstance(rid, str) else None,
                    family=rec.data.get("family")
                    if isinstance(rec.data.get("family"), str)
                    else None,
                    raw=rec.raw,
                )
            )
            return
        count("validate.ok")
        digest = sha256_text(canonical_json(rec.data))
        yield Item(task, rec.source_file, rec.line, digest, raw=rec.raw)


class FirstOfIdFn(beam.DoFn):
    """Keep the earliest record of each id; later ones are rejected as duplicate ids."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id

    def process(self, kv: tuple[str, Iterable[Item]]) -> Iterator[Any]:
        items = sorted(kv[1], key=lambda it: it.order_key)
        first = items[0]
        yield first
        for it in items[1:]:
            yield rejected(
                rejection(
                    stage="validate",
                    reason="validate.duplicate_id",
                    detail=f"id {it.id!r} first seen at {first.source_file}:{first.source_line}",
                    run_id=self.run_id,
                    item=it,
                )
            )


class Validate(beam.PTransform):
    """Schema-check records and enforce unique ids; outputs main and ``rejected``."""

    def __init__(self, run_id: str) -> None:
        super().__init__()
        self.run_id = run_id

    @no_annotations
    def expand(self, records: beam.PCollection) -> dict[str, beam.PCollection]:
        rid = self.run_id
        parsed = records | "Parse" >> Guarded(beam.ParDo(ValidateFn(rid)), "validate", rid)
        unique = (
            parsed["ok"]
            | "KeyById" >> beam.Map(lambda it: (it.id, it))
            | "GroupById" >> beam.GroupByKey()
            | "FirstOfId" >> Guarded(beam.ParDo(FirstOfIdFn(rid)), "validate", rid)
        )
        bad = (parsed[REJECTED], unique[REJECTED]) | "Rejected" >> beam.Flatten()
        return {"ok": unique["ok"], REJECTED: bad}
