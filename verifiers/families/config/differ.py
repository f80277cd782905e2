"""The config family's differ: one relevant field dropped or changed; values at relevant paths.

A configuration has no input to vary, so a *probe* here is a place to look: one relevant path
(``config.paths``: what the policies, the JSON Schema and the prompt refer to). The
*observation* of a solution on a probe is the values the path reaches in every applicable
document, documents keyed by ``kind/metadata.name`` (so document order does not matter) and
values in their parsed form (so comments, key order, quoting and YAML-vs-JSON spelling do not
matter). ``agree`` compares those values strictly on JSON types (``config.policies.same``),
except that two strings that are both Kubernetes quantities agree when they are equal as
numbers (``500m`` and ``0.5``).

Mutants (operators ``config.drop_field`` and ``config.change_value``): for each concrete place
a relevant path reaches in the reference, the key (or list item) removed, or its value changed
by type: integers +1, floats doubled, booleans negated, quantities doubled with their suffix
kept, other strings suffixed ``-x``. The mutated documents are written back in the task's
format (YAML through ``yaml.safe_dump_all``, JSON through ``json.dumps``).

Solutions are loaded in this process by the verifier's own loader (``safe_yaml``) under the
task's byte, depth and node caps, like ``config.judge``; nothing is executed, so ``observe``
needs no sandbox. The trial-deployed kinds (nginx, HAProxy, Prometheus rules) have their own
mutants and probes, ``config.deploy.differ``, observed by trial deployment in the sandbox. It
does NOT guard against: the wall clock of loading (bounded only by those
caps), or requirements the relevant paths do not cover (see ``config.paths``).
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import yaml

from tasksieve.schemas import ConfigSpec, TaskRecord
from tasksieve.schemas.task import DEPLOY_KINDS
from tasksieve.verifiers.families.config.deploy import differ as deploy
from tasksieve.verifiers.families.config.paths import Step, path_text, positions, relevant_paths
from tasksieve.verifiers.families.config.policies import parse_quantity, same
from tasksieve.verifiers.families.config.safe_yaml import ConfigLoadError, load_documents
from tasksieve.verifiers.families.probes import Mutant, Observation, Probe
from tasksieve.verifiers.sandbox.base import Sandbox

_QUANTITY_SUFFIXES = ("Ki", "Mi", "Gi", "Ti", "m", "k", "M", "G")


def _spec(task: TaskRecord) -> ConfigSpec:
    if not isinstance(task.verifier, ConfigSpec):
        raise ValueError(f"not a config task: {task.verifier.family}")
    return task.verifier


def _load(spec: ConfigSpec, text: str) -> list[Any]:
    return load_documents(text, spec.format, spec.max_bytes, spec.max_depth)


def _doc_key(index: int, doc: Any) -> str:
    kind = doc.get("kind") if isinstance(doc, dict) else None
    meta = doc.get("metadata") if isinstance(doc, dict) else None
    name = meta.get("name") if isinstance(meta, dict) else None
    if isinstance(kind, str) and isinstance(name, str):
        return f"{kind}/{name}"
    return f"doc {index}"


def dump(spec: ConfigSpec, docs: list[Any]) -> str:
    """Documents written back in the task's format."""
    if spec.format == "json":
        return "\n".join(json.dumps(d, ensure_ascii=False) for d in docs) + "\n"
    return str(yaml.safe_dump_all(docs, sort_keys=False, allow_unicode=True))


def changed(value: Any) -> Any:
    """A different value of the same type (see the module docstring); None for containers."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value * 2 if value else 1.0
    if isinstance(value, str):
        for suffix in ("", *_QUANTITY_SUFFIXES):
            number = value[: len(value) - len(suffix)] if suffix else value
            if value.endswith(suffix) and number.replace(".", "", 1).isdigit():
                return f"{Decimal(number) * 2}{suffix}"
        return f"{value}-x"
    return None


def _edit(doc: Any, steps: list[Step], new: Any, drop: bool) -> Any:
    out = copy.deepcopy(doc)
    parent = out
    for s in steps[:-1]:
        parent = parent[s]
    last = steps[-1]
    if drop:
        del parent[last]
    else:
        parent[last] = new
    return out


class ConfigDiffer:
    """Mutants, probes and observations for ``config`` tasks (see the module docstring)."""

    family = "config"

    def mutants(self, task: TaskRecord, limit: int, seed: int) -> list[Mutant]:
        """At most ``limit`` one-field mutants of the reference, deterministic for ``seed``."""
        spec = _spec(task)
        if spec.schema_kind in DEPLOY_KINDS:
            return deploy.mutants(task, limit, seed)
        try:
            docs = _load(spec, task.reference_solution)
        except ConfigLoadError:
            return []
        sites: dict[str, list[tuple[str, str, int, list[Step]]]] = {}
        seen: set[tuple[int, str]] = set()
        for kinds, path in relevant_paths(spec, task.prompt, docs):
            for i, doc in enumerate(docs):
                if kinds and not (isinstance(doc, dict) and doc.get("kind") in kinds):
                    continue
                for steps in positions(doc, path):
                    where = f"{_doc_key(i, doc)} {path_text(steps)}"
                    if (i, where) in seen:
                        continue
                    seen.add((i, where))
                    for op in ("config.drop_field", "config.change_value"):
                        sites.setdefault(op, []).append((op, where, i, steps))
        rng = random.Random(seed)
        for found in sites.values():
            rng.shuffle(found)
        out: list[Mutant] = []
        texts = {task.reference_solution}
        while len(out) < limit and any(sites.values()):
            for op in sorted(sites):
                if not sites[op] or len(out) >= limit:
                    continue
                _, where, i, steps = sites[op].pop(0)
                value = _value(docs[i], steps)
                drop = op == "config.drop_field"
                new = None if drop else changed(value)
                if not drop and new is None:
                    continue
                mutated = [*docs[:i], _edit(docs[i], steps, new, drop), *docs[i + 1 :]]
                text = dump(spec, mutated)
                if text not in texts:
                    texts.add(text)
                    out.append(Mutant(op, where, text))
        return out

    def probes(self, task: TaskRecord, limit: int, seed: int) -> list[Probe]:
        """One probe per relevant path of the reference, policies first, at most ``limit``."""
        spec = _spec(task)
        if spec.schema_kind in DEPLOY_KINDS:
            return deploy.probes(task, limit, seed)
        try:
            docs = _load(spec, task.reference_solution)
        except ConfigLoadError:
            docs = []
        paths = relevant_paths(spec, task.prompt, docs)
        npol = len(spec.policies)
        rest = paths[npol:]
        random.Random(seed).shuffle(rest)
        out = []
        for kinds, path in [*paths[:npol], *rest][: max(0, limit)]:
            label = f"{'|'.join(kinds)} {path}".strip()
            origin = (
                "task"
                if (list(kinds), path) in [(p.kinds, p.path) for p in spec.policies]
                else "derived"
            )
            out.append(Probe(label, {"kinds": list(kinds), "path": path}, origin=origin))
        return out

    def observe(
        self, task: TaskRecord, solutions: Sequence[str], probes: Sequence[Probe], sandbox: Sandbox
    ) -> list[list[Observation]]:
        """``result[i][j]``: the values ``solutions[i]`` holds at ``probes[j]``'s path."""
        spec = _spec(task)
        if spec.schema_kind in DEPLOY_KINDS:
            return deploy.observe(task, solutions, probes, sandbox)
        rows = []
        for sol in solutions:
            try:
                docs = _load(spec, sol)
            except ConfigLoadError as e:
                rows.append([Observation(False, f"parse: {e.limit or 'error'}") for _ in probes])
                continue
            rows.append([_observe(docs, p) for p in probes])
        return rows

    def agree(self, task: TaskRecord, a: Observation, b: Observation) -> bool:
        """Same values at the path (quantity strings compared as numbers); for the deploy kinds
        the same response and upstream path."""
        if _spec(task).schema_kind in DEPLOY_KINDS:
            return a.ok == b.ok and a.value == b.value
        if not (a.ok and b.ok):
            return a.ok == b.ok and a.value == b.value
        return _same(json.loads(a.value), json.loads(b.value))


def _value(doc: Any, steps: list[Step]) -> Any:
    for s in steps:
        doc = doc[s]
    return doc


def _observe(docs: list[Any], probe: Probe) -> Observation:
    kinds, path = probe.payload["kinds"], probe.payload["path"]
    found: dict[str, Any] = {}
    for i, doc in enumerate(docs):
        if kinds and not (isinstance(doc, dict) and doc.get("kind") in kinds):
            continue
        values = [[path_text(s), _value(doc, s)] for s in positions(doc, path)]
        found[_doc_key(i, doc)] = values
    return Observation.of(found)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, str) and isinstance(b, str) and a != b:
        try:
            return parse_quantity(a) == parse_quantity(b)
        except Exception:
            return False
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return same(a, b)
