"""The Great Expectations suites of a curate output: what each shard kind must satisfy.

Every suite is built from code (the record models, the reason registry and the run's own
manifest), never from stored JSON, so a suite cannot drift from the pipeline that writes the
shards. Batches are pandas frames (Arrow-backed dtypes, so integers keep their type when they
hold nulls) made by :mod:`tasksieve.pipeline.outputs.checks.run`:

- ``<kind>.schema``: one batch per shard file, one row per column of its Parquet schema;
- ``tasks`` / ``rejected`` / ``rollouts``: every shard of the kind, concatenated;
- ``per_task``: one row per scored task (kept, or rejected after scoring) with its ``n`` and the
  number of rollouts written for it.

What these suites do NOT guard: that a pass rate is right (they check it is k/n-shaped and in
range, not that the verdicts behind it are correct), the content of ``raw``/``prompt`` text,
nested list items (``gates``, ``findings``, ``verdict.checks``) beyond their Arrow type, and
anything about the input files.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import great_expectations as gx
import great_expectations.expectations as gxe
import pyarrow as pa
from pydantic import BaseModel

from tasksieve.schemas import CuratedTask, RejectedRecord, Rollout
from tasksieve.schemas.arrow import REJECTED_SCHEMA, ROLLOUTS_SCHEMA, TASKS_SCHEMA
from tasksieve.schemas.records import VerdictStatus
from tasksieve.schemas.reward import REWARD_MAX, REWARD_MIN
from tasksieve.transforms.reasons import reason_regex

SCHEMAS: dict[str, pa.Schema] = {
    "tasks": TASKS_SCHEMA,
    "rejected": REJECTED_SCHEMA,
    "rollouts": ROLLOUTS_SCHEMA,
}
MODELS: dict[str, type[BaseModel]] = {
    "tasks": CuratedTask,
    "rejected": RejectedRecord,
    "rollouts": Rollout,
}
VERDICT_STATUSES: tuple[str, ...] = typing.get_args(VerdictStatus)
SCORED_NULLABLE = ("n", "k", "n_requested", "pass_rate")
"""Rejected-record columns set only for tasks rejected after scoring."""


@dataclass(frozen=True)
class RunFacts:
    """What the manifest and the other shards say, for the suites that compare against them."""

    kept: int
    rejected: int
    rollouts: int
    too_hard: float
    too_easy: float
    task_ids: frozenset[str]
    """Ids of kept tasks and rejected records: what a rollout may reference."""


def type_name(t: pa.DataType) -> str:
    """An Arrow type as text, without the names of list items (Parquet writers differ)."""
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return f"list<{type_name(t.value_type)}>"
    if pa.types.is_struct(t):
        return "struct<" + ", ".join(f"{f.name}: {type_name(f.type)}" for f in t) + ">"
    return str(t)


def schema_frame_rows(schema: pa.Schema) -> list[dict[str, Any]]:
    """One row per column of a shard's schema: the batch of a ``<kind>.schema`` suite."""
    return [
        {"column": f.name, "typed": f"{f.name}: {type_name(f.type)}", "slot": f"{i}: {f.name}"}
        for i, f in enumerate(schema)
    ]


def non_null_columns(model: type[BaseModel]) -> list[str]:
    """Fields of a record model whose type does not admit None."""
    out: list[str] = []
    for name, info in model.model_fields.items():
        ann = info.annotation
        args = typing.get_args(ann)
        union = typing.get_origin(ann) in (typing.Union, types.UnionType)
        if not (union and type(None) in args) and ann is not type(None):
            out.append(name)
    return out


def _meta(guards: str) -> dict[str, Any]:
    return {"guards": guards}


def _suite(name: str, expectations: Iterable[gxe.Expectation]) -> gx.ExpectationSuite:
    suite = gx.ExpectationSuite(name=name)
    for e in expectations:
        suite.add_expectation(e)
    return suite


def schema_suite(kind: str) -> gx.ExpectationSuite:
    """Columns present, none unknown, in order, each of its Arrow type (one shard's schema)."""
    expected = schema_frame_rows(SCHEMAS[kind])
    names = [r["column"] for r in expected]
    return _suite(
        f"{kind}.schema",
        [
            gxe.ExpectColumnDistinctValuesToContainSet(
                column="column", value_set=names, meta=_meta("every column is present")
            ),
            gxe.ExpectColumnValuesToBeInSet(
                column="column", value_set=names, meta=_meta("no unknown column")
            ),
            gxe.ExpectColumnValuesToBeInSet(
                column="slot",
                value_set=[r["slot"] for r in expected],
                meta=_meta("columns in the documented order"),
            ),
            gxe.ExpectColumnValuesToBeInSet(
                column="typed",
                value_set=[r["typed"] for r in expected],
                meta=_meta("each column has its Arrow type"),
            ),
        ],
    )


def _not_null(columns: Sequence[str]) -> list[gxe.Expectation]:
    return [
        gxe.ExpectColumnValuesToNotBeNull(column=c, meta=_meta(f"{c} is always set"))
        for c in columns
    ]


def _count(value: int, what: str) -> gxe.Expectation:
    return gxe.ExpectTableRowCountToEqual(
        value=value, meta=_meta(f"row count equals the manifest's counts.{what}")
    )


def _ge(a: str, b: str, guards: str) -> gxe.Expectation:
    return gxe.ExpectColumnPairValuesAToBeGreaterThanB(
        column_A=a,
        column_B=b,
        or_equal=True,
        ignore_row_if="either_value_is_missing",
        meta=_meta(guards),
    )


def tasks_suite(facts: RunFacts) -> gx.ExpectationSuite:
    """Kept tasks: unique ids, no nulls, counts in range, pass rate in the band and interval."""
    return _suite(
        "tasks",
        [
            _count(facts.kept, "kept"),
            gxe.ExpectColumnValuesToBeUnique(column="id", meta=_meta("task ids are unique")),
            *_not_null(non_null_columns(CuratedTask)),
            gxe.ExpectColumnValuesToBeBetween(
                column="pass_rate", min_value=0, max_value=1, meta=_meta("pass_rate in [0, 1]")
            ),
            gxe.ExpectColumnValuesToBeBetween(
                column="pass_rate",
                min_value=facts.too_hard,
                max_value=facts.too_easy,
                strict_min=True,
                strict_max=True,
                meta=_meta("kept pass_rate inside the run's band (too_hard, too_easy)"),
            ),
            gxe.ExpectColumnValuesToBeBetween(column="k", min_value=0, meta=_meta("k >= 0")),
            gxe.ExpectColumnValuesToBeBetween(column="n", min_value=1, meta=_meta("n >= 1")),
            _ge("n", "k", "n >= k"),
            _ge("n_requested", "n", "n <= n_requested"),
            _ge("pass_rate", "ci_low", "ci_low <= pass_rate"),
            _ge("ci_high", "pass_rate", "pass_rate <= ci_high"),
            gxe.ExpectColumnValuesToBeInSet(
                column="difficulty", value_set=["keep"], meta=_meta("kept tasks are 'keep'")
            ),
        ],
    )


def rejected_suite(facts: RunFacts) -> gx.ExpectationSuite:
    """Rejected records: known reason codes, no nulls, scored columns consistent when set."""
    always = [c for c in non_null_columns(RejectedRecord) if c not in SCORED_NULLABLE]
    return _suite(
        "rejected",
        [
            _count(facts.rejected, "rejected"),
            *_not_null(always),
            gxe.ExpectColumnValuesToMatchRegex(
                column="reason",
                regex=reason_regex(),
                meta=_meta("reason is a registered code (tasksieve.transforms.reasons)"),
            ),
            gxe.ExpectColumnValuesToBeBetween(
                column="pass_rate", min_value=0, max_value=1, meta=_meta("pass_rate in [0, 1]")
            ),
            gxe.ExpectColumnValuesToBeBetween(column="k", min_value=0, meta=_meta("k >= 0")),
            _ge("n", "k", "n >= k"),
        ],
    )


def rollouts_suite(facts: RunFacts) -> gx.ExpectationSuite:
    """Rollouts: reference existing tasks, one per (task, sample), well-formed verdicts."""
    return _suite(
        "rollouts",
        [
            _count(facts.rollouts, "rollouts"),
            *_not_null([*non_null_columns(Rollout), "verdict.status"]),
            gxe.ExpectColumnValuesToBeInSet(
                column="task_id",
                value_set=sorted(facts.task_ids),
                meta=_meta("task_id names a kept task or a rejected record of this run"),
            ),
            gxe.ExpectCompoundColumnsToBeUnique(
                column_list=["task_id", "sample_index", "turn"],
                meta=_meta("one rollout per (task_id, sample_index, turn)"),
            ),
            gxe.ExpectColumnValuesToBeBetween(
                column="sample_index", min_value=0, meta=_meta("sample_index >= 0")
            ),
            gxe.ExpectColumnValuesToBeInSet(
                column="verdict.status",
                value_set=list(VERDICT_STATUSES),
                meta=_meta("verdict.status is a known status"),
            ),
            gxe.ExpectColumnValuesToBeBetween(
                column="verdict.tests_passed", min_value=0, meta=_meta("tests_passed >= 0")
            ),
            _ge("verdict.tests_total", "verdict.tests_passed", "tests_passed <= tests_total"),
            gxe.ExpectColumnValuesToBeBetween(
                column="reward",
                min_value=REWARD_MIN,
                max_value=REWARD_MAX,
                meta=_meta("reward within its bounds (null only for infra_error)"),
            ),
        ],
    )


def per_task_suite() -> gx.ExpectationSuite:
    """Each scored task has exactly ``n`` first-turn rollouts (one per sample or episode)."""
    return _suite(
        "per_task",
        [
            gxe.ExpectColumnPairValuesToBeEqual(
                column_A="n",
                column_B="rollouts",
                ignore_row_if="neither",
                meta=_meta("a scored task has exactly n rollouts"),
            ),
        ],
    )
