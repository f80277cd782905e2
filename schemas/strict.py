"""The strict-type rule shared by every record: a value of the wrong JSON type is an error.

Pydantic's default ("lax") mode converts ``"600"`` to 600, ``"true"`` or ``1`` to True and
``True`` to 1, so a mistyped field validates and silently means something else. Every model
here runs in strict mode instead, with two deliberate allowances that cannot change meaning:

- an integer where a float is expected (JSON has one number type; ``10`` is ``10.0``);
- a float with no fractional part where an integer is expected (``512.0`` is the JSON number
  512; JSON Schema's ``integer`` accepts it too). ``512.5`` is still an error.

Floats must be finite: ``NaN`` and ``Infinity`` are not JSON and compare unequal to
themselves (this holds inside ``JsonObject`` values too). What this does NOT check: values
typed ``Any`` (SQL expected rows, policy values, JSON Schemas) are taken as given, since any
JSON value is legitimate there.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, ConfigDict, JsonValue

STRICT = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


def _whole_float_to_int(value: Any) -> Any:
    """Turn a float with no fractional part into the int it equals; leave anything else."""
    if type(value) is float and value.is_integer():
        return int(value)
    return value


JsonInt = Annotated[int, BeforeValidator(_whole_float_to_int)]
"""An integer that also accepts a whole-number float (``3.0``) but never ``3.5``, ``"3"``, True."""


JsonObject = dict[str, JsonValue]
"""A JSON object of any shape (nested objects, arrays, strings, numbers, booleans, null)."""
