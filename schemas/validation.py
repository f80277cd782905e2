"""Check one parsed input record against TaskRecord and describe each problem precisely.

A problem names the file, line, task id and the field as a dotted path through the document
(``verifier.io_cases.0.stdout``): pydantic's discriminated-union tags are removed, so the path
reads like the input. Messages are pydantic's, without its "Value error, " prefix; a type
error also says what was given, its JSON type and value (``Input should be a valid number
(got string "600")``): the models are strict (tasksieve.schemas.strict), so ``"600"`` for a number,
``"true"`` or ``1`` for a boolean and ``2.5`` for an integer are errors, not conversions.

A ``verifier`` given as JSON text (as in tasksieve's own shards and many Parquet/HF datasets)
is decoded before validation. Not checked here: duplicate ids across records (the caller
keeps the set) and whether the task actually runs (that is the gates' job).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from tasksieve.schemas.task import TaskRecord

UNKNOWN = "-"
_DISCRIMINATOR = "family"
_ID_LIMIT = 120
_VALUE_LIMIT = 60
_SHOW_INPUT = ("literal_error", "finite_number")
JSON_TYPES = {
    dict: "object",
    list: "array",
    str: "string",
    int: "number",
    float: "number",
    bool: "boolean",
    type(None): "null",
}


@dataclass(frozen=True)
class Problem:
    """One thing wrong with one record; ``field`` is "-" for whole-record problems."""

    path: str
    line: int
    task_id: str
    field: str
    message: str

    def format(self) -> str:
        """Render as ``path:line: task_id: field: message``."""
        return f"{self.path}:{self.line}: {self.task_id}: {self.field}: {self.message}"


def record_id(data: Mapping[str, Any] | None) -> str | None:
    """The record's ``id`` when it is a non-empty string, else None."""
    if data is None:
        return None
    rid = data.get("id")
    return rid if isinstance(rid, str) and rid else None


def display_id(data: Mapping[str, Any] | None) -> str:
    """The id as shown in problems: escaped, shortened, "-" when unknown."""
    rid = record_id(data)
    if rid is None:
        return UNKNOWN
    shown = rid.encode("unicode_escape").decode("ascii")
    return shown if len(shown) <= _ID_LIMIT else shown[:_ID_LIMIT] + "..."


def _json_tag(node: Any, step: int | str) -> bool:
    """Whether ``step`` is the union tag pydantic adds inside a JSON value (``dict``, ``str``)."""
    if not isinstance(step, str) or (isinstance(node, Mapping) and step in node):
        return False
    return node is not None and type(node).__name__ == step


def field_path(loc: tuple[int | str, ...], data: Any) -> str:
    """Dotted path for a pydantic error location, with union tags dropped ("-" for the root).

    A location step is a tag when the object there has no such key and its ``family`` (the
    discriminator) equals the step, e.g. ``("verifier", "code", "style")`` -> ``verifier.style``,
    or when it names the Python type of the value there (JSON values: ``metadata.a.dict.b``
    -> ``metadata.a.b``).
    """
    parts: list[str] = []
    node = data
    for step in loc:
        if _json_tag(node, step):
            continue
        if isinstance(node, Mapping) and isinstance(step, str) and step not in node:
            if node.get(_DISCRIMINATOR) == step:
                continue
            node = None
        elif isinstance(node, Mapping):
            node = node.get(step)
        elif isinstance(node, list) and isinstance(step, int) and 0 <= step < len(node):
            node = node[step]
        else:
            node = None
        parts.append(str(step))
    return ".".join(parts) if parts else UNKNOWN


def given(value: Any) -> str:
    """Describe a given value for a message: its JSON type, and the value when it is scalar."""
    kind = JSON_TYPES.get(type(value), type(value).__name__)
    if isinstance(value, dict | list) or value is None:
        return kind
    try:
        shown = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        shown = repr(value)
    if len(shown) > _VALUE_LIMIT:
        shown = shown[:_VALUE_LIMIT] + "..."
    return f"{kind} {shown}"


def _message(err: Mapping[str, Any]) -> str:
    msg = str(err["msg"])
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, ") :]
    kind = str(err["type"])
    if (kind.endswith("_type") or kind in _SHOW_INPUT) and "input" in err:
        msg += f" (got {given(err['input'])})"
    return msg


def _decode_verifier(data: Mapping[str, Any]) -> tuple[Mapping[str, Any], str | None]:
    """Decode a verifier given as JSON text; return the data and a note when that fails."""
    text = data.get("verifier")
    if not isinstance(text, str):
        return data, None
    try:
        spec = json.loads(text)
    except json.JSONDecodeError as e:
        return data, f"verifier is text but not valid JSON: {e.msg} at column {e.colno}"
    if not isinstance(spec, dict):
        return data, None
    return {**data, "verifier": spec}, None


def validate_record(
    path: str, line: int, data: Mapping[str, Any] | None, error: str | None = None
) -> tuple[TaskRecord | None, list[Problem]]:
    """Validate one record; return the TaskRecord (or None) and its problems (or [])."""
    tid = display_id(data)
    if error is not None or data is None:
        return None, [Problem(path, line, tid, UNKNOWN, error or "record has no data")]
    data, note = _decode_verifier(data)
    try:
        return TaskRecord.model_validate(data), []
    except ValidationError as e:
        problems = []
        for err in e.errors():
            field = field_path(tuple(err["loc"]), data)
            msg = note if note and field == "verifier" else _message(err)
            if err["type"] == "union_tag_not_found":
                field, msg = f"{field}.{_DISCRIMINATOR}", f"Field required ({msg})"
            elif err["type"] == "union_tag_invalid":
                field = f"{field}.{_DISCRIMINATOR}"
            problems.append(Problem(path, line, tid, field, msg))
        return None, problems
