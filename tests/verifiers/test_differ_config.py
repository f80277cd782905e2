"""The config differ: one relevant field dropped or changed; values at relevant paths."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tasksieve.schemas import TaskRecord
from tasksieve.verifiers.families.config.differ import ConfigDiffer, changed
from tasksieve.verifiers.families.config.paths import relevant_paths
from tasksieve.verifiers.families.config.safe_yaml import load_documents
from tasksieve.verifiers.families.probes import Observation
from tasksieve.verifiers.sandbox.process.sandbox import ProcessSandbox

POD = """apiVersion: v1
kind: Pod
metadata:
  name: cache
  labels:
    app: cache
spec:
  containers:
  - name: cache
    image: redis:7
    ports:
    - containerPort: 6379
    resources:
      limits:
        memory: 512Mi
"""
PROMPT = "Write a Pod named `cache` running `redis:7` on port 6379 with a memory limit of 512Mi."


def _task(reference: str = POD, policies: list[dict[str, Any]] | None = None) -> TaskRecord:
    if policies is None:
        policies = [
            {"id": "name", "path": "metadata.name", "op": "equals", "value": "cache"},
            {"id": "mem", "path": "spec.containers[*].resources.limits.memory", "op": "exists"},
        ]
    return TaskRecord.model_validate(
        {
            "id": "config.t",
            "family": "config",
            "prompt": PROMPT,
            "verifier": {
                "family": "config",
                "schema_kind": "kubernetes",
                "kubernetes_version": "1.29",
                "policies": policies,
            },
            "reference_solution": reference,
        }
    )


@pytest.fixture(scope="module")
def sandbox() -> ProcessSandbox:
    return ProcessSandbox()


def _docs(text: str) -> list[Any]:
    return load_documents(text, "yaml", 1_000_000, 64)


# ---------------------------------------------------------------- relevant paths
def test_relevant_paths_are_policies_then_leaves_the_prompt_quotes_once() -> None:
    task = _task()
    found = [p for _, p in relevant_paths(task.verifier, task.prompt, _docs(POD))]  # type: ignore[arg-type]
    assert found[:2] == ["metadata.name", "spec.containers[*].resources.limits.memory"]
    assert "spec.containers[0].image" in found  # quoted, held by one leaf
    assert "spec.containers[0].ports[0].containerPort" in found
    assert "metadata.labels.app" not in found  # 'cache' is held by three leaves: not attributed
    assert "spec.containers[0].resources.limits.memory" not in found  # a policy covers it


# ---------------------------------------------------------------- mutants
def test_mutants_load_and_each_changes_one_relevant_field() -> None:
    ref = _docs(POD)[0]
    made = ConfigDiffer().mutants(_task(), 50, 0)
    assert {m.operator for m in made} == {"config.drop_field", "config.change_value"}
    for m in made:
        (doc,) = _docs(m.solution)
        assert doc != ref
        flat_ref, flat_new = _flatten(ref), _flatten(doc)
        diff = {k for k in flat_ref.keys() | flat_new.keys() if flat_ref.get(k) != flat_new.get(k)}
        assert len(diff) == 1, (m.where, diff)
        assert m.where.split(" ", 1)[1] in next(iter(diff))


def _flatten(node: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(node, dict):
        out: dict[str, Any] = {}
        for k, v in node.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    if isinstance(node, list):
        out = {}
        for i, v in enumerate(node):
            out.update(_flatten(v, f"{prefix}[{i}]"))
        return out
    return {prefix: node}


@pytest.mark.parametrize("limit", [0, 1, 3])
def test_mutants_are_capped_and_deterministic(limit: int) -> None:
    d = ConfigDiffer()
    one = d.mutants(_task(), limit, 5)
    assert len(one) == limit
    assert one == d.mutants(_task(), limit, 5)


def test_a_reference_that_does_not_load_gives_no_mutants() -> None:
    assert ConfigDiffer().mutants(_task("a: [unclosed"), 10, 0) == []


@pytest.mark.parametrize(
    ("value", "new"),
    [(3, 4), (1.5, 3.0), (True, False), ("512Mi", "1024Mi"), ("500m", "1000m"), ("web", "web-x")],
)
def test_changed_keeps_the_type(value: Any, new: Any) -> None:
    assert changed(value) == new


# ---------------------------------------------------------------- observations
REFORMATTED = """# the cache pod
kind: Pod
apiVersion: v1
spec:
  containers: [{name: cache, image: "redis:7", resources: {limits: {memory: 0.5Gi}},
                ports: [{containerPort: 6379}]}]
metadata: {labels: {app: cache}, name: cache}
"""


def test_comments_key_order_flow_style_and_quantity_spelling_do_not_count(
    sandbox: ProcessSandbox,
) -> None:
    d, task = ConfigDiffer(), _task()
    probes = d.probes(task, 20, 0)
    ref, other = d.observe(task, [POD, REFORMATTED], probes, sandbox)
    assert len(probes) >= 4
    assert all(d.agree(task, a, b) for a, b in zip(ref, other, strict=True))


def test_a_change_where_the_prompt_cares_is_seen(sandbox: ProcessSandbox) -> None:
    d, task = ConfigDiffer(), _task()
    probes = d.probes(task, 20, 0)
    other = POD.replace("containerPort: 6379", "containerPort: 6380")
    ref, seen = d.observe(task, [POD, other], probes, sandbox)
    differ = [p.label for p, a, b in zip(probes, ref, seen, strict=True) if not d.agree(task, a, b)]
    assert differ == ["Pod spec.containers[0].ports[0].containerPort"]
    assert json.loads(ref[probes.index(next(p for p in probes if p.label == differ[0]))].value)


def test_an_unrelated_change_is_equivalent(sandbox: ProcessSandbox) -> None:
    d, task = ConfigDiffer(), _task()
    probes = d.probes(task, 20, 0)
    other = POD.replace("app: cache", "app: redis-cache")
    ref, seen = d.observe(task, [POD, other], probes, sandbox)
    assert all(d.agree(task, a, b) for a, b in zip(ref, seen, strict=True))


BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
    for p, c in zip("abcdefgh", "bcdefghi", strict=True)
)


@pytest.mark.parametrize(
    "hostile", [BOMB, "[" * 10_000, "x" * 2_000_000, "!!python/object:os.system ls"]
)
def test_hostile_solutions_stay_contained(sandbox: ProcessSandbox, hostile: str) -> None:
    d, task = ConfigDiffer(), _task()
    probes = d.probes(task, 20, 0)
    ref, bad, again = d.observe(task, [POD, hostile, POD], probes, sandbox)
    assert all(not o.ok and o.value.startswith("parse") for o in bad)
    assert all(a.ok and d.agree(task, a, b) for a, b in zip(ref, again, strict=True))


@pytest.mark.parametrize(
    ("a", "b", "agree"),
    [
        ({"d": [["x", "512Mi"]]}, {"d": [["x", "0.5Gi"]]}, True),
        ({"d": [["x", "512Mi"]]}, {"d": [["x", "512M"]]}, False),
        ({"d": [["x", 1]]}, {"d": [["x", 1.0]]}, True),
        ({"d": [["x", 1]]}, {"d": [["x", True]]}, False),
        ({"d": [["x", "80"]]}, {"d": [["x", 80]]}, False),
        ({"d": []}, {"d": [["x", None]]}, False),
    ],
)
def test_agree_is_strict_on_types_except_quantities(
    a: dict[str, Any], b: dict[str, Any], agree: bool
) -> None:
    d, task = ConfigDiffer(), _task()
    assert d.agree(task, Observation.of(a), Observation.of(b)) is agree
    assert d.agree(task, Observation.of(b), Observation.of(a)) is agree
