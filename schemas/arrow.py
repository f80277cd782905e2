"""Arrow schemas for the Parquet shards, derived from the pydantic records.

Nested models become structs, lists become lists; the verifier spec and the task metadata
travel as JSON text (fields marked ``contentMediaType: application/json``), stored with
Parquet's JSON logical type, so one column type serves every shape and DuckDB reads them as
its JSON type. Every schema carries ``schema_version`` metadata;
the writer adds the run's config fingerprint.
"""

from __future__ import annotations

import types
import typing
from typing import Any, Literal, Union, get_args, get_origin

import pyarrow as pa
from pydantic import BaseModel

from tasksieve.schemas.records import (
    JSON_TEXT,
    CuratedTask,
    RejectedRecord,
    Rollout,
    TrajectoryStep,
)
from tasksieve.schemas.task import SCHEMA_VERSION


def _arrow_type(tp: Any) -> tuple[pa.DataType, bool]:
    """Map a Python annotation to (arrow type, nullable)."""
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        if len(args) != 1:
            raise TypeError(f"cannot map union {tp!r} to arrow")
        inner, _ = _arrow_type(args[0])
        return inner, True
    if origin is Literal:
        return pa.string(), False
    if origin is list:
        (item,) = get_args(tp)
        inner, _ = _arrow_type(item)
        return pa.list_(inner), False
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return pa.struct(model_fields(tp)), False
    simple: dict[Any, pa.DataType] = {
        str: pa.string(),
        int: pa.int64(),
        float: pa.float64(),
        bool: pa.bool_(),
    }
    if tp in simple:
        return simple[tp], False
    raise TypeError(f"cannot map {tp!r} to arrow")


def model_fields(model: type[BaseModel]) -> list[pa.Field]:
    """One nullable Arrow field per model field, in declaration order."""
    hints = typing.get_type_hints(model)
    out = []
    for name, info in model.model_fields.items():
        typ, _nullable = _arrow_type(hints[name])
        if info.json_schema_extra == JSON_TEXT:
            typ = pa.json_()
        out.append(pa.field(name, typ, nullable=True))
    return out


def arrow_schema(model: type[BaseModel], fingerprint: str = "") -> pa.Schema:
    meta = {"schema_version": SCHEMA_VERSION, "record": model.__name__}
    if fingerprint:
        meta["config_fingerprint"] = fingerprint
    return pa.schema(model_fields(model), metadata=meta)


TASKS_SCHEMA = arrow_schema(CuratedTask)
ROLLOUTS_SCHEMA = arrow_schema(Rollout)
REJECTED_SCHEMA = arrow_schema(RejectedRecord)
TRAJECTORIES_SCHEMA = arrow_schema(TrajectoryStep)
