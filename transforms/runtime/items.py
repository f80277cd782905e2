"""The element that flows between stages, and the helper that turns one into a rejection.

An ``Item`` crosses every stage boundary of the pipeline (a shuffle, a side input, a Flatten
the in-memory runner materialises) through pickle, since Beam's coder knows no type of ours.
Pickled as the dataclass it is, the task travels as its five pydantic models (each with its
``__dict__``, fields-set and private state): about 3.3 kB per task of the scale corpus and
25-90 us to unpickle, much of it the garbage collector walking the many small containers.
``Item.__reduce__`` instead sends the task as the plain Python data of ``model_dump()``
and rebuilds it with ``model_validate`` (the task was validated once already, so it passes
again and compares equal): about half the bytes and a third of the time to decode.

The plain data travels pickled on its own, as one ``bytes`` value inside the item's pickle.
A decoded ``Item`` keeps those bytes and unpickles them only when a field of the task is first
read; it validates them into a ``TaskRecord`` only when ``task`` itself is first read. The host
stages read only the id, family and prompt (``Item.id``, ``Item.family``, ``Item.prompt``,
answered from the plain data), so a task crosses their shuffles without being validated
again. An ``Item`` nothing read since decoding, as the in-memory runner holds every value of a
GroupByKey until the group is read, is one small object around those bytes (about 2.5x less
memory than its unpickled data) and is encoded again by copying them.
"""

from __future__ import annotations

import hashlib
import json
import pickle
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from tasksieve.schemas import (
    AmbiguityCheck,
    Finding,
    GateResult,
    RejectedRecord,
    StrengthCheck,
    TaskRecord,
)


@dataclass
class Item:
    """A validated task plus where it came from and what the stages found about it."""

    task: TaskRecord
    source_file: str
    source_line: int
    input_sha256: str
    raw: str = ""  # the input record's text, whole (rejected rows carry it for re-ingestion)
    findings: list[Finding] = field(default_factory=list)
    gates: list[GateResult] = field(default_factory=list)
    reference_s: float | None = None  # the reference's measured runtime (set by the gates)
    strength: StrengthCheck | None = None  # test strength (set by the TestStrength stage)

    @property
    def id(self) -> str:
        return self._task_str("id")

    @property
    def family(self) -> str:
        return self._task_str("family")

    @property
    def prompt(self) -> str:
        return self._task_str("prompt")

    def _task_str(self, name: str) -> str:
        """A string field of the task, from its plain data while the task is unread."""
        data = self._plain()
        return str(getattr(self.task, name) if data is None else data[name])

    def _plain(self) -> dict[str, Any] | None:
        """The task as plain data while it has not been read (or set) since decoding."""
        d = self.__dict__
        if "task" in d:
            return None
        data = d.get(_DATA)
        if data is None and _BLOB in d:
            data = d[_DATA] = pickle.loads(d[_BLOB])
        return data

    if not TYPE_CHECKING:  # at run time only: mypy would take any attribute name as valid

        def __getattr__(self, name: str) -> Any:
            """Reached only for an attribute not set: ``task`` of a decoded ``Item`` on its
            first read, validated from the plain data it travelled as."""
            data = self._plain() if name == "task" else None
            if data is None:
                raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
            task = self.__dict__["task"] = TaskRecord.model_validate(data)
            self.__dict__.pop(_DATA, None)
            self.__dict__.pop(_BLOB, None)
            return task

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        """Pickle the task as plain data (see the module's docstring); every other field as
        it is, by name, so a field added to the class travels without a change here."""
        rest = {name: getattr(self, name) for name in _REST}
        d = self.__dict__
        blob = None if "task" in d else d.get(_BLOB)  # a decoded task never read: as it came
        if blob is None:
            blob = pickle.dumps(self.task.model_dump(), protocol=pickle.HIGHEST_PROTOCOL)
        return (_item_from, (blob, rest))

    @property
    def order_key(self) -> tuple[str, int, str]:
        """Deterministic order: the earliest record in the input wins a tie."""
        return (self.source_file, self.source_line, self.id)


_REST = tuple(f.name for f in fields(Item) if f.name != "task")
_DATA = "_task_data"  # a decoded Item's task as plain data, until ``task`` is first read
_BLOB = "_task_blob"  # the same data pickled, as it travelled, until ``task`` is first read


def _item_from(blob: bytes, rest: dict[str, Any]) -> Item:
    """Rebuild a pickled ``Item`` (``Item.__reduce__``): the task's pickled plain data is kept
    as it came, unpickled when a task field is first read and validated when ``task`` is."""
    item = object.__new__(Item)
    item.__dict__.update(rest)
    item.__dict__[_BLOB] = blob
    return item


@dataclass
class Scored:
    """A task with its verified samples counted: k of n passed, n of ``requested`` obtained."""

    item: Item
    n: int
    k: int
    model_id: str
    requested: int
    passing: list[tuple[int, str]] = field(default_factory=list)
    """The passing samples as (sample_index, solution), for the Ambiguity stage."""
    ambiguity: AmbiguityCheck | None = None  # set by the Ambiguity stage
    k_by_turn: list[int] | None = None
    """Multi-turn runs: episodes passed by turn 1..T (k is the band turn's entry)."""
    episode_steps: list[int] | None = None
    """Agent runs: the steps of each episode, in episode order."""

    @property
    def short(self) -> bool:
        """Whether the sampler returned fewer samples than asked."""
        return self.n < self.requested


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def canonical_json(data: Any) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def rejection(
    *,
    stage: str,
    reason: str,
    detail: str,
    run_id: str,
    item: Item | None = None,
    source_file: str = "",
    source_line: int = 0,
    record_id: str | None = None,
    family: str | None = None,
    raw: str = "",
    n: int | None = None,
    k: int | None = None,
    n_requested: int | None = None,
    pass_rate: float | None = None,
) -> dict[str, Any]:
    """Build a rejected-record row (a plain dict matching ``RejectedRecord``).

    ``raw`` (or the item's) is kept whole so that the record can be fixed and fed back in;
    only ``detail``, the pipeline's own message, is shortened.
    """
    if item is not None:
        source_file, source_line = item.source_file, item.source_line
        record_id, family = item.id, item.family
        raw = raw or item.raw
    rec = RejectedRecord(
        record_id=record_id,
        family=family,
        stage=stage,
        reason=reason,
        detail=detail[:2000],
        source_file=source_file,
        source_line=source_line,
        raw=raw,
        run_id=run_id,
        n=n,
        k=k,
        n_requested=n_requested,
        pass_rate=pass_rate,
    )
    return rec.model_dump()
