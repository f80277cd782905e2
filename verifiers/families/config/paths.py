"""The paths of a config task that matter: where its policies, its schema and its prompt look.

A *relevant path* is a ``(kinds, path)`` pair in policy syntax (``config.policies``):

1. every policy's own path and kinds;
2. for a JSON Schema task, every property the schema names (``properties``, recursing into
   nested objects and array ``items``, at most ``MAX_SCHEMA_DEPTH`` deep);
3. every leaf of the reference whose value the prompt quotes (a string of two or more
   characters, or an integer, standing alone in the prompt, and held by that one leaf only:
   a value repeated across leaves, such as a name reused in labels, is not attributed) or
   whose key the prompt writes in backticks: the prompt asks for it even when no policy
   checks it.

``positions`` walks a path to the concrete places it reaches in loaded documents, as steps
(keys and list indices) that ``config.differ`` can edit. Plain functions, no I/O.

It does NOT guard against: requirements the prompt states in words only ("a sensible memory
limit"), or values it quotes in another spelling than the reference uses.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from typing import Any

from tasksieve.schemas import ConfigSpec
from tasksieve.verifiers.families.config.policies import Segment, parse_path

MAX_SCHEMA_DEPTH = 4
Step = str | int
RelevantPath = tuple[tuple[str, ...], str]


def path_text(steps: list[Step]) -> str:
    """Policy-syntax text for concrete steps (``a.b[0]["x.y"]``)."""
    out = ""
    for s in steps:
        out += Segment(index=s).text() if isinstance(s, int) else Segment(key=s).text()
    return out.lstrip(".")


def positions(doc: Any, path: str) -> list[list[Step]]:
    """The concrete steps of every place ``path`` reaches in ``doc`` where a value is present."""
    found: list[tuple[list[Step], Any]] = [([], doc)]
    for seg in parse_path(path):
        nxt: list[tuple[list[Step], Any]] = []
        for steps, value in found:
            if seg.key is not None:
                if isinstance(value, dict) and value.get(seg.key) is not None:
                    nxt.append(([*steps, seg.key], value[seg.key]))
            elif isinstance(value, list):
                idx = range(len(value)) if seg.index is None else [seg.index]
                nxt.extend(([*steps, i], value[i]) for i in idx if 0 <= i < len(value))
        found = nxt
    return [steps for steps, _ in found]


def _schema_paths(schema: Any, prefix: str, depth: int) -> Iterator[str]:
    if depth > MAX_SCHEMA_DEPTH or not isinstance(schema, dict):
        return
    props = schema.get("properties")
    if isinstance(props, dict):
        for key, sub in props.items():
            path = f"{prefix}{Segment(key=str(key)).text()}".lstrip(".")
            yield path
            yield from _schema_paths(sub, path, depth + 1)
    items = schema.get("items")
    if isinstance(items, dict) and prefix:
        yield from _schema_paths(items, f"{prefix}[*]", depth + 1)


def _leaves(node: Any, steps: list[Step]) -> Iterator[tuple[list[Step], Any]]:
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _leaves(v, [*steps, str(k)])
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _leaves(v, [*steps, i])
    else:
        yield steps, node


def _quoted(prompt: str, value: Any) -> bool:
    if isinstance(value, bool) or value is None:
        return False
    if isinstance(value, int):
        text = str(value)
    elif isinstance(value, str) and len(value) >= 2:
        text = value
    else:
        return False
    return re.search(r"(?<![\w.:/-])" + re.escape(text) + r"(?![\w:/-]|\.\w)", prompt) is not None


def relevant_paths(spec: ConfigSpec, prompt: str, docs: list[Any]) -> list[RelevantPath]:
    """Every relevant path (see the module docstring), policies first, without repeats."""
    out: list[RelevantPath] = [(tuple(p.kinds), p.path) for p in spec.policies]
    if spec.schema_kind == "jsonschema" and spec.json_schema is not None:
        out += [((), p) for p in _schema_paths(spec.json_schema, "", 0)]
    ticked = set(re.findall(r"`([^`\s]{1,64})`", prompt))
    counts = Counter(json.dumps(v) for d in docs for _, v in _leaves(d, []))
    covered = {path_text(st) for _, p in out for d in docs for st in positions(d, p)}
    for doc in docs:
        kind = doc.get("kind") if isinstance(doc, dict) else None
        kinds = (kind,) if isinstance(kind, str) else ()
        for steps, value in _leaves(doc, []):
            key = next((s for s in reversed(steps) if isinstance(s, str)), None)
            quoted = _quoted(prompt, value) and counts[json.dumps(value)] == 1
            if steps and (quoted or key in ticked) and path_text(steps) not in covered:
                out.append((kinds, path_text(steps)))
    return list(dict.fromkeys(out))
