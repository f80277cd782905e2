"""Schema checks for one loaded document: Kubernetes (offline, strict) or the task's JSON Schema.

Both run on jsonschema validators whose regex keywords (``pattern``, ``patternProperties`` and
the key matching in ``additionalProperties``) evaluate with RE2 (``config.regex``), so a
task's catastrophic regex costs linear time on candidate strings and keys. Every regex of a
task's schema is compiled when the validator is built: one RE2 refuses is a ``TaskProblem``
naming where it sits. One more task problem: ``unevaluatedProperties`` in the same schema as
``patternProperties`` (2019-09 and 2020-12 drafts), because jsonschema evaluates that pairing
with Python's backtracking ``re`` and offers no hook to change it.

Kubernetes: the strict schemas ``kubernetes-validate`` ships, read from its package data once
per (version, kind, apiVersion) and kept with their validators (a fresh read of the 1.8 MB
definitions file per document was the main cost of a verification before).

It does NOT guard against: a regex the walk cannot see (one inside a ``$ref`` target outside
the usual keyword locations; it still runs on RE2 when evaluated, and an unsupported one is a
task problem then), the time a huge schema takes (bounded only by the caller's wall clock),
nor Kubernetes rules beyond the OpenAPI schema (see ``config.verifier``).
"""

from __future__ import annotations

import functools
import importlib.resources
import json
import re
from collections.abc import Iterator
from typing import Any, cast

import jsonschema
from jsonschema.exceptions import ValidationError, best_match
from kubernetes_validate.utils import all_versions
from referencing import Registry, Resource
from referencing.exceptions import Unresolvable

from tasksieve.verifiers.families.config.regex import RegexRejected, compile_task_regex, search

_KIND = re.compile(r"[A-Za-z][A-Za-z0-9]{0,62}")
_API_VERSION = re.compile(r"(?:[a-z0-9][a-z0-9.-]{0,251}/)?v[0-9]+(?:(?:alpha|beta)[0-9]+)?")
_DETAIL = 300
_SUB_ONE = frozenset(
    {"additionalProperties", "unevaluatedProperties", "items", "additionalItems",
     "unevaluatedItems", "contains", "propertyNames", "not", "if", "then", "else"}
)  # fmt: skip
_SUB_LIST = frozenset({"allOf", "anyOf", "oneOf", "prefixItems", "items"})
_SUB_MAP = frozenset(
    {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"}
)


class TaskProblem(Exception):
    """The task itself is broken (schema, version or policies); says nothing of a solution."""


# ------------------------------------------------------------------ RE2 regex keywords
def _pattern(validator: Any, pattern: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if validator.is_type(instance, "string") and not search(pattern, instance):
        shown = instance if len(instance) <= 60 else instance[:57] + "..."
        yield ValidationError(f"{shown!r} does not match the pattern {pattern!r}")


def _pattern_properties(validator: Any, patterns: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if search(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(validator: Any, extra: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    declared = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    extras = [
        key for key in instance if key not in declared and not any(search(p, key) for p in patterns)
    ]
    if validator.is_type(extra, "object"):
        for key in extras:
            yield from validator.descend(instance[key], extra, path=key)
    elif extra is False and extras:
        names = ", ".join(repr(k) for k in sorted(extras)[:5])
        more = f" (+{len(extras) - 5} more)" if len(extras) > 5 else ""
        yield ValidationError(f"additional properties are not allowed: {names}{more}")


@functools.cache
def re2_validator_class(base: type) -> Any:
    """``base`` (a jsonschema validator class) with its regex keywords evaluated by RE2."""
    return jsonschema.validators.extend(
        base,
        {
            "pattern": _pattern,
            "patternProperties": _pattern_properties,
            "additionalProperties": _additional_properties,
        },
    )


def _pointer(*parts: str) -> str:
    return "/".join(p.replace("~", "~0").replace("/", "~1") for p in parts)


def _subschemas(node: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """(relative pointer, subschema) for each subschema position of a schema object."""
    for key, value in node.items():
        if key in _SUB_MAP and isinstance(value, dict):
            yield from ((_pointer(key, str(k)), v) for k, v in value.items())
        elif key in _SUB_LIST and isinstance(value, list):
            yield from ((_pointer(key, str(i)), v) for i, v in enumerate(value))
        elif key in _SUB_ONE:
            yield _pointer(key), value


def schema_regexes(schema: Any) -> tuple[list[tuple[str, str]], bool, bool]:
    """Every regex in ``schema`` as (JSON pointer, pattern), and whether the schema uses
    ``patternProperties`` and ``unevaluatedProperties`` anywhere."""
    found: list[tuple[str, str]] = []
    uses_pattern_properties = uses_unevaluated = False
    stack: list[tuple[str, Any]] = [("#", schema)]
    while stack:
        where, node = stack.pop()
        if not isinstance(node, dict):
            continue
        if isinstance(node.get("pattern"), str):
            found.append((f"{where}/pattern", node["pattern"]))
        if isinstance(node.get("patternProperties"), dict) and node["patternProperties"]:
            uses_pattern_properties = True
            found.extend((f"{where}/patternProperties", str(p)) for p in node["patternProperties"])
        uses_unevaluated = uses_unevaluated or "unevaluatedProperties" in node
        stack.extend((f"{where}/{rel}", sub) for rel, sub in _subschemas(node))
    return found, uses_pattern_properties, uses_unevaluated


class _UnknownDraft:
    """Stands for a ``$schema`` that names no draft jsonschema knows."""


def json_schema_validator(schema: dict[str, Any]) -> Any:
    """A validator for the task's schema (checked first); raises TaskProblem if it is bad."""
    cls: Any = jsonschema.Draft202012Validator
    if "$schema" in schema:
        cls = jsonschema.validators.validator_for(schema, default=cast(Any, _UnknownDraft))
        if cls is _UnknownDraft:
            raise TaskProblem(f"json_schema names an unknown $schema {schema['$schema']!r}")
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError as e:
        raise TaskProblem(f"invalid json_schema: {error_text(e)}") from None
    regexes, pattern_properties, unevaluated = schema_regexes(schema)
    for where, pattern in regexes:
        try:
            compile_task_regex(pattern)
        except RegexRejected as e:
            raise TaskProblem(f"json_schema {where}: {e}") from None
    if pattern_properties and unevaluated and "unevaluatedProperties" in cls.VALIDATORS:
        raise TaskProblem(
            "json_schema combines unevaluatedProperties with patternProperties, which cannot "
            "be evaluated in linear time; use additionalProperties instead"
        )
    # An explicit empty registry: $refs resolve inside the schema only, never over the network.
    return re2_validator_class(cls)(schema, registry=Registry())


@functools.lru_cache(maxsize=64)
def cached_json_schema_validator(schema_json: str) -> Any:
    """``json_schema_validator`` for a schema given as canonical JSON text, kept for reuse."""
    return json_schema_validator(json.loads(schema_json))


def error_text(e: jsonschema.ValidationError | jsonschema.SchemaError) -> str:
    """Where and why, short: ``spec/replicas: 'two' is not of type 'integer'``."""
    where = "/".join(str(p) for p in e.absolute_path) or "<root>"
    message = e.message if len(e.message) <= 160 else f"fails the {e.validator!r} keyword"
    return f"{where}: {message}"[:_DETAIL]


def check_json_schema(doc: Any, validator: Any) -> tuple[bool, str]:
    """Validate one document against the task's JSON Schema; (passed, detail)."""
    try:
        errors = list(validator.iter_errors(doc))
    except Unresolvable as e:
        raise TaskProblem(f"json_schema has an unresolvable $ref: {e}"[:_DETAIL]) from None
    except RegexRejected as e:
        raise TaskProblem(f"json_schema: {e}"[:_DETAIL]) from None
    if not errors:
        return True, "valid"
    more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
    best = best_match(errors)
    assert best is not None
    return False, error_text(best) + more


# ------------------------------------------------------------------ Kubernetes
def kubernetes_version(wanted: str) -> str:
    """The ``kubernetes-validate`` schema version for ``wanted`` ("1.29" -> "1.29.0")."""
    m = re.fullmatch(r"v?(\d+)\.(\d+)(?:\.\d+)?", wanted.strip())
    shipped = sorted(set(all_versions()), key=lambda v: tuple(int(x) for x in v.split(".")))
    if m is not None:
        exact = f"{int(m.group(1))}.{int(m.group(2))}.0"
        if exact in shipped:
            return exact
    raise TaskProblem(
        f"kubernetes_version {wanted!r} is not shipped by kubernetes-validate "
        f"(have {shipped[0]} .. {shipped[-1]})"
    )


def _schema_dir(version: str) -> Any:
    root = importlib.resources.files("kubernetes_validate") / "kubernetes-json-schema"
    return root / f"v{version}-local-strict"


@functools.lru_cache(maxsize=4)
def _kubernetes_definitions(version: str) -> Registry:
    text = (_schema_dir(version) / "_definitions.json").read_text(encoding="utf-8")
    return Resource.from_contents(json.loads(text)) @ Registry()


@functools.lru_cache(maxsize=512)
def kubernetes_validator(version: str, kind: str, api_version: str) -> Any | None:
    """The strict validator for one kind (kept for reuse), or None if the version lacks it.

    ``kind`` and ``api_version`` must already match ``_KIND`` / ``_API_VERSION`` (they name a
    file): ``apps/v1`` -> ``deployment-apps-v1.json``, ``rbac.authorization.k8s.io/v1`` ->
    ``role-rbac-v1.json``, ``v1`` -> ``service-v1.json``.
    """
    group, _, rest = api_version.rpartition("/")
    name = f"{kind.lower()}-{group.split('.')[0]}-{rest}" if group else f"{kind.lower()}-{rest}"
    path = _schema_dir(version) / f"{name}.json"
    if not path.is_file():
        return None
    schema = json.loads(path.read_text(encoding="utf-8"))
    registry = Resource.from_contents(schema) @ _kubernetes_definitions(version)
    return re2_validator_class(jsonschema.Draft202012Validator)(schema, registry=registry)


def check_kubernetes(doc: Any, version: str) -> tuple[bool, str]:
    """Validate one document against the strict Kubernetes schema; (passed, detail)."""
    if not isinstance(doc, dict):
        return False, f"not a mapping but {type(doc).__name__}"
    kind, api = doc.get("kind"), doc.get("apiVersion")
    if not isinstance(kind, str) or not _KIND.fullmatch(kind):
        return False, f"missing or malformed kind: {kind!r}"[:_DETAIL]
    if not isinstance(api, str) or not _API_VERSION.fullmatch(api):
        return False, f"missing or malformed apiVersion: {api!r}"[:_DETAIL]
    validator = kubernetes_validator(version, kind, api)
    if validator is None:
        return False, f"unknown kind {kind} for apiVersion {api} in Kubernetes {version}"
    error = next(iter(validator.iter_errors(doc)), None)
    if error is not None:
        return False, error_text(error)
    return True, f"valid {api} {kind} (Kubernetes {version})"
