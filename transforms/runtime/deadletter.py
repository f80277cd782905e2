"""Dead letters: a record whose processing raises is rejected with the error; the run goes on.

Every stage applies its per-record steps through ``Guarded``, which runs the step with Beam's
exception handling (``with_exception_handling``; outputs are held back until an element is
done, so a failing element emits nothing but its dead letter). Each dead letter becomes one
rejection row per record found in the failing element (``records_in``): stage ``<stage>``,
reason ``<stage>.error`` (``error_reason``; registered in ``transforms.reasons``), and a detail
holding the exception type and message and the innermost frames of its traceback. Counter
``<stage>.errors``: one per record rejected that way.

What a failing element rejects: the records it holds. That is the record itself for a
per-record step, and every record of the group for a step over a GroupByKey group or a
CoGroupByKey join (no decision about any of them was made, so none is kept or passed on).

It does NOT guard against:
- a DoFn's ``setup()`` failing (a benchmark file that does not load, a model that cannot be
  read): that is the run's configuration, not a record, and fails the run as before;
- a step that holds no record (near-dedup's graph bookkeeping on keys, the index it reads,
  the file sink): a failure there is the pipeline's own bug and fails the run; an element
  in which ``records_in`` finds no record raises ``DeadLetterError`` rather than vanishing;
- a worker process that dies outright (segfault, out-of-memory kill): the runner retries the
  bundle; Beam's ``use_subprocess`` would catch it at the cost of a process per step;
- counters a failing element bumped before it raised: they stay counted.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

import apache_beam as beam
from apache_beam.typehints.decorators import no_annotations

from tasksieve.transforms.ingest.records import SourceRecord
from tasksieve.transforms.reasons import error_reason
from tasksieve.transforms.runtime.common import REJECTED, count, rejected
from tasksieve.transforms.runtime.items import Item, Scored, rejection

log = logging.getLogger("tasksieve.deadletter")

DEAD = "dead_letter"
"""The tag of a step's dead-letter output: ``(element, Fault)`` pairs."""

Record: TypeAlias = Item | Scored | SourceRecord
BeamError: TypeAlias = tuple[type, str, Sequence[str]]
"""What Beam's exception handling records: exception type, ``repr``, formatted traceback."""

_MESSAGE_CHARS = 600
_DETAIL_CHARS = 1900  # ``rejection`` cuts the detail at 2000
_MAX_DEPTH = 4


class DeadLetterError(RuntimeError):
    """A step failed on an element that holds no record to reject (a bug to fix)."""


@dataclass(frozen=True)
class Fault:
    """One exception raised by a stage on one element: its type, message and traceback."""

    stage: str
    error_type: str
    message: str
    traceback: str = ""

    def __post_init__(self) -> None:
        error_reason(self.stage)  # refuses an unknown stage, naming the known ones

    @property
    def reason(self) -> str:
        return error_reason(self.stage)

    def summary(self, who: str = "") -> str:
        """``<who> raised <Type>: <message>`` on one line (``who``: the stage unless given),
        the message shortened."""
        msg = " ".join(self.message.split())
        if len(msg) > _MESSAGE_CHARS:
            msg = msg[: _MESSAGE_CHARS - 3] + "..."
        head = f"{who or self.stage} raised {self.error_type}"
        return f"{head}: {msg}" if msg else head

    def detail(self, who: str = "") -> str:
        """The summary, then as much of the traceback's innermost end as fits."""
        head = self.summary(who)
        tb = self.traceback.strip()
        if not tb:
            return head
        room = max(0, _DETAIL_CHARS - len(head) - 40)
        if len(tb) > room:
            tb = "..." + tb[len(tb) - room :]
        return f"{head}\ntraceback (innermost last):\n{tb}"


def _frames(lines: Sequence[str]) -> str:
    """The traceback's frames without its header and Python's ``^^^`` marker lines."""
    text = "".join(lines)
    kept = [
        line
        for line in text.splitlines()
        if line.strip(" ^~") and not line.startswith("Traceback (most recent call last)")
    ]
    return "\n".join(kept)


def fault_from(stage: str, error: BeamError) -> Fault:
    """The ``Fault`` for what Beam's exception handling recorded about one exception."""
    exc_type, exc_repr, lines = error
    frames = list(lines)
    last = frames.pop().rstrip("\n") if frames else exc_repr
    name, sep, message = last.partition(": ")
    if not sep:  # an exception without a message: the last line is its name
        message = ""
    return Fault(
        stage=stage,
        error_type=getattr(exc_type, "__qualname__", name) or name,
        message=message,
        traceback=_frames(frames),
    )


def fault_of(stage: str, exc: BaseException) -> Fault:
    """The ``Fault`` for an exception caught by the caller (traceback included)."""
    lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
    return fault_from(stage, (type(exc), repr(exc), lines))


def records_in(element: Any) -> list[Record]:
    """The records an element holds: itself, or those inside its tuples, lists, dicts and
    grouped values (a few levels deep) and the ``item`` of a state object (an episode's
    ``EpisodeState``), each once, in the order found."""
    found: list[Record] = []
    seen: set[int] = set()

    def walk(x: Any, depth: int) -> None:
        if isinstance(x, Item | Scored | SourceRecord):
            if id(x) not in seen:
                seen.add(id(x))
                found.append(x)
            return
        if isinstance(getattr(x, "item", None), Item):  # a stage's state of one task
            walk(x.item, depth + 1)  # (a multi-turn episode's); Scored is matched above
            return
        if depth >= _MAX_DEPTH or isinstance(x, str | bytes | bytearray):
            return
        if isinstance(x, dict):
            x = list(x.values())
        if isinstance(x, tuple | list) or type(x).__name__ == "_UnwindowedValues":
            for v in x:
                walk(v, depth + 1)

    walk(element, 0)
    return found


def error_row(record: Record, fault: Fault, run_id: str) -> dict[str, Any]:
    """The rejection row for one record of a failing element."""
    stage, reason, detail = fault.stage, fault.reason, fault.detail()
    if isinstance(record, Scored):
        return rejection(
            stage=stage,
            reason=reason,
            detail=detail,
            run_id=run_id,
            item=record.item,
            n=record.n,
            k=record.k,
            n_requested=record.requested,
        )
    if isinstance(record, Item):
        return rejection(stage=stage, reason=reason, detail=detail, run_id=run_id, item=record)
    data = record.data if isinstance(record.data, dict) else {}
    rid, family = data.get("id"), data.get("family")
    return rejection(
        stage=stage,
        reason=reason,
        detail=detail,
        run_id=run_id,
        source_file=record.source_file,
        source_line=record.line,
        record_id=rid if isinstance(rid, str) else None,
        family=family if isinstance(family, str) else None,
        raw=record.raw,
    )


def reject_records(records: Iterable[Record], fault: Fault, run_id: str) -> Iterator[Any]:
    """Tagged rejection rows, one per record, counting ``<stage>.errors`` for each."""
    for record in records:
        count(f"{fault.stage}.errors")
        yield rejected(error_row(record, fault, run_id))


def dead_letter_rows(dead: tuple[Any, Fault], run_id: str) -> Iterator[dict[str, Any]]:
    """Plain rejection rows for every record of one dead letter ``(element, fault)``."""
    element, fault = dead
    records = records_in(element)
    if not records:
        raise DeadLetterError(
            f"{fault.summary()} on an element holding no record ({type(element).__name__}); "
            "this step must not be guarded with record rejections"
        )
    log.warning("%s; rejecting %d record(s)", fault.summary(), len(records))
    for tagged in reject_records(records, fault, run_id):
        yield tagged.value


def main_output_type(step: beam.ParDo, input_type: Any) -> Any:
    """The type of a step's main output: what Beam infers from its body, less the tagged ones.

    Beam's inference reads the ``yield`` statements, so a step that also yields
    ``TaggedOutput`` (rollouts, rejections) infers ``Union[TaggedOutput, X]``; Beam strips
    that annotation only at the top level, not inside the union. Since Beam 2.78 resolves
    string annotations, the next step's declared input (``X``) is checked against it, so the
    tagged members are dropped here; a step that yields only tagged outputs gets ``Any``.
    """
    inferred = step.infer_output_type(input_type)
    tagged = beam.pvalue.TaggedOutput
    if isinstance(inferred, beam.typehints.typehints.UnionConstraint):
        members = [t for t in inferred.union_types if t is not tagged]
        if not members:
            return Any
        return members[0] if len(members) == 1 else beam.typehints.Union[tuple(members)]
    return Any if inferred is tagged else inferred


class Attempt(beam.PTransform):
    """Apply a ParDo (Map, FlatMap) with Beam's exception handling.

    Returns its outputs by tag: ``ok`` (main), the ``tags`` asked for, ``rejected`` (the
    step's own rejections) and ``DEAD``: ``(element, Fault)`` for each element that raised,
    for the caller to turn into rejections or a retry.
    """

    def __init__(self, step: beam.ParDo, stage: str, tags: Sequence[str] = ()) -> None:
        super().__init__()
        error_reason(stage)  # refuses an unknown stage, naming the known ones
        self.step = step
        self.stage = stage
        self.tags = tuple(tags)

    @no_annotations
    def expand(self, pcoll: beam.PCollection) -> dict[str, beam.PCollection]:
        tags = (*self.tags, REJECTED)
        # declare every tag, else Beam warns that the tags are not in the type hints
        main_type = main_output_type(self.step, pcoll.element_type)
        step = self.step.with_output_types(main_type, **dict.fromkeys(tags, Any))
        out = pcoll | "Try" >> step.with_outputs(*tags, main="ok").with_exception_handling(
            dead_letter_tag="failed"
        )
        stage = self.stage
        faults = out["failed"] | "Fault" >> beam.MapTuple(
            lambda element, error: (element, fault_from(stage, error))
        )
        tagged = {t: out[t] for t in self.tags}
        return {"ok": out["ok"], **tagged, REJECTED: out[REJECTED], DEAD: faults}


class Guarded(beam.PTransform):
    """A stage step whose failing elements become ``<stage>.error`` rejections.

    Returns ``{"ok": ..., <tags>: ..., "rejected": ...}``: the step's outputs, with its own
    rejections and one row per record of every failing element in ``rejected``.
    """

    def __init__(self, step: beam.ParDo, stage: str, run_id: str, tags: Sequence[str] = ()) -> None:
        super().__init__()
        self.attempt = Attempt(step, stage, tags)
        self.run_id = run_id

    @no_annotations
    def expand(self, pcoll: beam.PCollection) -> dict[str, beam.PCollection]:
        out = pcoll | "Attempt" >> self.attempt
        rows = out.pop(DEAD) | "DeadLetters" >> beam.FlatMap(dead_letter_rows, self.run_id)
        out[REJECTED] = (out[REJECTED], rows) | "Rejected" >> beam.Flatten()
        return out


def merge_rejected(*pcolls: beam.PCollection, label: str = "Rejected") -> beam.PCollection:
    """One ``rejected`` PCollection from several (a stage with more than one guarded step)."""
    return tuple(pcolls) | label >> beam.Flatten()
