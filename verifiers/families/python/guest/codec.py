"""The tagged JSON codec the Python harness and its parent pass values in: plain data only.

JSON plus tags for what it cannot hold (tuples ``$t``, sets ``$s``, frozensets ``$fs``, dicts
with any keys ``$d``, bytes ``$b``, complex ``$c``, non-finite floats ``$f``). ``encode``
reads values through the built-in types' own methods, so a subclass cannot change what is
sent; ``decode`` builds only built-in values. Standard library only: it runs inside the
sandbox (inlined into the harness by ``tasksieve.verifiers.sandbox.guest.bundle``) and in the
parent, which imports it.

It does NOT carry objects (instances of other classes, callables, generators: ``encode``
raises TypeError) nor preserve identity or aliasing (a list twice in a value decodes as two).
"""

from __future__ import annotations

import base64
import math
from typing import Any

_BAD_TAG = "unknown or malformed tagged value"


def encode(v: Any, depth: int = 0) -> Any:
    """Turn a value into tagged JSON data; raise TypeError for anything not plain data."""
    if depth > 200:
        raise TypeError("value nested too deeply")
    if v is None or isinstance(v, bool):
        return bool(v) if v is not None else None
    if isinstance(v, int):
        return int.__index__(v)
    if isinstance(v, float):
        f = float.__float__(v)
        return f if math.isfinite(f) else {"$f": repr(f)}
    if isinstance(v, str):
        return str.__str__(v)
    d = depth + 1
    if isinstance(v, list):
        return [encode(x, d) for x in list.__iter__(v)]
    if isinstance(v, tuple):
        return {"$t": [encode(x, d) for x in tuple.__iter__(v)]}
    if isinstance(v, frozenset):
        return {"$fs": [encode(x, d) for x in frozenset.__iter__(v)]}
    if isinstance(v, set):
        return {"$s": [encode(x, d) for x in set.__iter__(v)]}
    if isinstance(v, dict):
        return {"$d": [[encode(k, d), encode(x, d)] for k, x in dict.items(v)]}
    if isinstance(v, bytes | bytearray):
        return {"$b": base64.b64encode(bytes(v)).decode()}
    if isinstance(v, complex):
        return {"$c": [encode(v.real, d), encode(v.imag, d)]}
    raise TypeError(f"cannot pass a {type(v).__name__} across the sandbox boundary")


def decode(v: Any) -> Any:
    """Inverse of ``encode``; builds only built-in values."""
    if v is None or type(v) in (bool, int, float, str):
        return v
    if type(v) is list:
        return [decode(x) for x in v]
    if type(v) is dict and len(v) == 1:
        ((tag, x),) = v.items()
        if tag == "$t" and type(x) is list:
            return tuple(decode(i) for i in x)
        if tag == "$s" and type(x) is list:
            return {decode(i) for i in x}
        if tag == "$fs" and type(x) is list:
            return frozenset(decode(i) for i in x)
        if tag == "$d" and type(x) is list:
            return {decode(k): decode(i) for k, i in x}
        if tag == "$b" and type(x) is str:
            return base64.b64decode(x)
        if tag == "$c" and type(x) is list and len(x) == 2:
            return complex(float(x[0]), float(x[1]))
        if tag == "$f" and x in ("nan", "inf", "-inf"):
            return float(x)
    raise ValueError(_BAD_TAG)
