"""DuckDB type names for the record schemas: pydantic models and the Parquet (Arrow) schemas.

The catalog casts JSON text to typed values and builds empty views with the columns of the
shards, so it needs each schema as a DuckDB type string. The types are derived here from the
definitions in ``schemas/`` (never written by hand), so a field added there appears in the
catalog without an edit. Values typed ``Any`` (SQL expected rows, policy values, JSON Schemas,
metadata) stay ``JSON``: any JSON value is legitimate there, so no single type fits.
"""

from __future__ import annotations

import types
import typing
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import pyarrow as pa
from pydantic import BaseModel

from tasksieve.schemas.repo import RepoSpec
from tasksieve.schemas.task import ApiSpec, CodeSpec, ConfigSpec, SqlSpec

FAMILY_SPECS: dict[str, type[BaseModel]] = {
    "code": CodeSpec,
    "sql": SqlSpec,
    "api": ApiSpec,
    "config": ConfigSpec,
    "repo": RepoSpec,
}

_SIMPLE: dict[Any, str] = {str: "VARCHAR", int: "BIGINT", float: "DOUBLE", bool: "BOOLEAN"}

Structure = str | list[Any] | dict[str, Any]
"""A type as DuckDB's ``json_transform`` takes it: a type name, ``[item]`` or ``{field: ...}``."""


def quote_ident(name: str) -> str:
    """``name`` as a DuckDB quoted identifier."""
    return '"' + name.replace('"', '""') + '"'


def struct_type(fields: dict[str, str]) -> str:
    """``STRUCT("a" T, ...)`` from field name -> DuckDB type, in the given order."""
    return "STRUCT(" + ", ".join(f"{quote_ident(k)} {t}" for k, t in fields.items()) + ")"


def type_name(structure: Structure) -> str:
    """The DuckDB type string of a ``json_transform`` structure."""
    if isinstance(structure, dict):
        return struct_type({k: type_name(v) for k, v in structure.items()})
    if isinstance(structure, list):
        return type_name(structure[0]) + "[]"
    return structure


def structure(tp: Any) -> Structure:
    """The DuckDB type of a Python annotation as the schemas use them.

    ``X | None`` is ``X`` (every DuckDB value may be NULL); Literal strings are VARCHAR;
    ``dict[str, X]`` is ``MAP(VARCHAR, X)``; ``Any``, JSON values and unions of several
    types are ``JSON``.
    """
    origin = get_origin(tp)
    if origin is Annotated:
        return structure(get_args(tp)[0])
    if origin in (Union, types.UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        return structure(args[0]) if len(args) == 1 else "JSON"
    if origin is Literal:
        return "VARCHAR"
    if origin is list:
        (item,) = get_args(tp)
        return [structure(item)]
    if origin is dict:
        key, value = get_args(tp)
        inner = type_name(structure(value))
        return "JSON" if key is not str or inner == "JSON" else f"MAP(VARCHAR, {inner})"
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return model_fields(tp)
    return _SIMPLE.get(tp, "JSON")


def model_fields(model: type[BaseModel]) -> dict[str, Structure]:
    """Field name -> type structure for every field of ``model``, in declaration order."""
    hints = typing.get_type_hints(model, include_extras=True)
    return {name: structure(hints[name]) for name in model.model_fields}


def merged_fields(models: list[type[BaseModel]]) -> dict[str, Structure]:
    """The union of the models' fields (first declaration order wins).

    Raises TypeError when two models give one field name different types: the merged
    struct could not hold both, so the schemas would need a rename first.
    """
    out: dict[str, Structure] = {}
    for model in models:
        for name, typ in model_fields(model).items():
            if out.setdefault(name, typ) != typ:
                raise TypeError(
                    f"verifier field {name!r} is {type_name(out[name])} in one family and "
                    f"{type_name(typ)} in {model.__name__}: rename one to give the catalog "
                    "one type per field"
                )
    return out


def verifier_structure(family: str | None = None) -> dict[str, Structure]:
    """One family's verifier spec as a struct structure, or all families' fields merged."""
    if family is not None:
        return model_fields(FAMILY_SPECS[family])
    return merged_fields(list(FAMILY_SPECS.values()))


def arrow_to_duckdb(typ: pa.DataType) -> str:
    """The type DuckDB gives a Parquet column written with this Arrow type."""
    if getattr(typ, "extension_name", None) == "arrow.json":
        return "JSON"
    if pa.types.is_list(typ) or pa.types.is_large_list(typ):
        return arrow_to_duckdb(typ.value_type) + "[]"
    if pa.types.is_struct(typ):
        return struct_type({f.name: arrow_to_duckdb(f.type) for f in typ})
    simple = {
        pa.string(): "VARCHAR",
        pa.large_string(): "VARCHAR",
        pa.int64(): "BIGINT",
        pa.int32(): "INTEGER",
        pa.float64(): "DOUBLE",
        pa.bool_(): "BOOLEAN",
    }
    if typ in simple:
        return simple[typ]
    raise TypeError(f"no DuckDB type for Arrow type {typ}")


def arrow_columns(schema: pa.Schema) -> dict[str, str]:
    """Column name -> DuckDB type for an Arrow schema."""
    return {f.name: arrow_to_duckdb(f.type) for f in schema}
