"""The config verifier, its bounded loader and its policy evaluator; hostile inputs contained."""

from __future__ import annotations

import json
import socket
import tracemalloc
from collections import Counter
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from tasksieve.schemas import ConfigSpec, PolicyCheck, TaskRecord
from tasksieve.transforms.samplers import extract_solution
from tasksieve.verifiers.families.config import safe_yaml, schema_checks
from tasksieve.verifiers.families.config.judge import judge
from tasksieve.verifiers.families.config.policies import (
    evaluate,
    parse_path,
    parse_quantity,
    policy_problems,
)
from tasksieve.verifiers.families.config.safe_yaml import ConfigLoadError, load_json, load_yaml
from tasksieve.verifiers.families.config.schema_checks import kubernetes_version
from tasksieve.verifiers.families.config.verifier import ConfigVerifier
from tasksieve.verifiers.sandbox.base import Execution, Limits, Sandbox

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
REPLAY_PASSES = {  # examples/README.md, "replay passes (of 4)"
    "config.json_app_settings": 4,
    "config.k8s_deployment_limits": 4,
    "config.k8s_pod_security": 2,
    "config.k8s_default_deny": 2,
    "config.json_alert_rules": 0,
    "config.k8s_hardened_stack": 0,
}
MEMORY_BUDGET = 64 * 2**20  # peak Python allocations while judging one hostile input


class NoSandbox(Sandbox):
    """A sandbox that must never be used: the config verifier judges data in-process."""

    name = "none"

    def run(
        self,
        files: dict[str, bytes | str],
        command: list[str],
        limits: Limits,
        stdin: bytes = b"",
        collect: tuple[str, ...] = (),
    ) -> Execution:
        raise AssertionError("the config verifier must not run anything")


VERIFIER = ConfigVerifier(NoSandbox())


def _examples() -> dict[str, TaskRecord]:
    lines = (EXAMPLES / "tasks" / "config.jsonl").read_text(encoding="utf-8").splitlines()
    tasks = [TaskRecord.model_validate_json(ln) for ln in lines if ln.strip()]
    return {t.id: t for t in tasks}


EXAMPLE_TASKS = _examples()


def k8s_task(policies: list[dict[str, Any]] | None = None, version: str = "1.29") -> TaskRecord:
    return TaskRecord(
        id="t.k8s",
        family="config",
        prompt="write a manifest",
        reference_solution="",
        verifier={
            "family": "config",
            "schema_kind": "kubernetes",
            "kubernetes_version": version,
            "policies": policies or [],
        },
    )


def json_task(schema: dict[str, Any], fmt: str = "json") -> TaskRecord:
    return TaskRecord(
        id="t.json",
        family="config",
        prompt="write a config",
        reference_solution="",
        verifier={
            "family": "config",
            "format": fmt,
            "schema_kind": "jsonschema",
            "json_schema": schema,
        },
    )


DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
        - name: web
          image: nginx:1.25
          resources: {limits: {memory: 256Mi, cpu: 500m}}
"""
SERVICE = """\
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{port: 80, targetPort: 8080}]
"""
LIMITS = [
    {"id": "mem", "kinds": ["Deployment"], "op": "exists",
     "path": "spec.template.spec.containers[*].resources.limits.memory"},
    {"id": "mem-max", "kinds": ["Deployment"], "op": "lte", "value": "1Gi",
     "path": "spec.template.spec.containers[*].resources.limits.memory"},
]  # fmt: skip


def spec(task: TaskRecord) -> ConfigSpec:
    """The task's config spec, for judging in this process."""
    assert isinstance(task.verifier, ConfigSpec)
    return task.verifier


def policy(op: str, path: str, value: Any = None, kinds: list[str] | None = None) -> PolicyCheck:
    return PolicyCheck(id="p", op=op, path=path, value=value, kinds=kinds or [])


# ------------------------------------------------------------------ the example set
@pytest.mark.parametrize("task_id", sorted(EXAMPLE_TASKS))
def test_example_reference_passes(task_id: str) -> None:
    task = EXAMPLE_TASKS[task_id]
    verdict = VERIFIER.verify(task, task.reference_solution)
    assert verdict.status == "pass", verdict.detail
    assert verdict.tests_passed == verdict.tests_total == len(verdict.checks)


@pytest.mark.parametrize("task_id", sorted(EXAMPLE_TASKS))
def test_example_trivial_solutions_fail(task_id: str) -> None:
    task = EXAMPLE_TASKS[task_id]
    trivial = VERIFIER.trivial_solutions(task)
    assert "" in trivial and "{}" in trivial
    for text in trivial:
        assert not VERIFIER.verify(task, text).passed, text


def test_replay_completions_pass_as_the_readme_says() -> None:
    passes: Counter[str] = Counter()
    for line in (EXAMPLES / "replay" / "completions.jsonl").read_text().splitlines():
        row = json.loads(line)
        task = EXAMPLE_TASKS.get(row["task_id"])
        if task is not None:
            solution = extract_solution(row["completion"], "config")
            passes[task.id] += VERIFIER.verify(task, solution).passed
    assert {t: passes[t] for t in REPLAY_PASSES} == REPLAY_PASSES


def test_trivial_includes_bare_document_of_the_reference_kind() -> None:
    trivial = VERIFIER.trivial_solutions(EXAMPLE_TASKS["config.k8s_deployment_limits"])
    bare = [json.loads(t) for t in trivial if t not in ("", "{}")]
    assert bare == [{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}}]


# ------------------------------------------------------------------ verdicts and checks
def test_checks_are_named_per_document_and_policy() -> None:
    verdict = VERIFIER.verify(k8s_task(LIMITS), DEPLOYMENT + "---\n" + SERVICE)
    assert verdict.status == "pass", verdict.detail
    assert [c.name for c in verdict.checks] == [
        "parse", "schema:0/Deployment/web", "schema:1/Service/web", "policy:mem", "policy:mem-max",
    ]  # fmt: skip


def test_failing_policy_gives_fail_with_counts() -> None:
    big = DEPLOYMENT.replace("memory: 256Mi", "memory: 2Gi")
    verdict = VERIFIER.verify(k8s_task(LIMITS), big)
    assert verdict.status == "fail"
    assert (verdict.tests_passed, verdict.tests_total) == (3, 4)
    failed = [c for c in verdict.checks if not c.passed]
    assert [c.name for c in failed] == ["policy:mem-max"]
    assert "containers[0].resources.limits.memory" in failed[0].detail


def test_multi_document_yaml_each_document_validated() -> None:
    broken_service = SERVICE.replace("targetPort: 8080", "targetPort: [8080]")
    verdict = VERIFIER.verify(k8s_task(), "---\n" + DEPLOYMENT + "---\n---\n" + broken_service)
    assert verdict.status == "fail"
    assert [(c.name, c.passed) for c in verdict.checks] == [
        ("parse", True), ("schema:0/Deployment/web", True), ("schema:1/Service/web", False),
    ]  # fmt: skip


def test_policy_on_kind_that_is_missing_fails() -> None:
    verdict = VERIFIER.verify(k8s_task(LIMITS), SERVICE)
    assert verdict.status == "fail"
    assert "no document of kind" in verdict.checks[-1].detail


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("apiVersion: v1\nkind: Deployment\nmetadata: {name: x}\n", "unknown kind"),
        ("apiVersion: apps/v1\nkind: Deploymnt\nmetadata: {name: x}\n", "unknown kind"),
        ("apiVersion: apps.evil.io/v1\nkind: Deployment\nmetadata: {name: x}\n", "apps/v1"),
        ("apiVersion: v1\nkind: ../../../../etc/x\n", "malformed kind"),
        ("kind: Pod\nmetadata: {name: x}\n", "malformed apiVersion"),
        ("- a\n- b\n", "not a mapping"),
        (DEPLOYMENT.replace("replicas: 2", "replicas: two"), "replicas"),
        (DEPLOYMENT.replace("replicas: 2", "replicas: 2\n  replica: 2"), "replica"),
    ],
)
def test_invalid_kubernetes_documents_fail_with_a_clear_message(text: str, message: str) -> None:
    verdict = VERIFIER.verify(k8s_task(), text)
    assert verdict.status == "fail"
    assert message in verdict.checks[1].detail


@pytest.mark.parametrize(("wanted", "shipped"), [("1.29", "1.29.0"), ("v1.29.3", "1.29.0")])
def test_kubernetes_version_mapping(wanted: str, shipped: str) -> None:
    assert kubernetes_version(wanted) == shipped


@pytest.mark.parametrize("version", ["1.2", "1.99", "latest"])
def test_unshipped_kubernetes_version_is_a_task_error(version: str) -> None:
    verdict = VERIFIER.verify(k8s_task(version=version), DEPLOYMENT)
    assert verdict.status == "error"
    assert verdict.detail.startswith("task: kubernetes_version")


def test_json_schema_pass_and_fail() -> None:
    schema = {"type": "object", "required": ["port"], "properties": {"port": {"type": "integer"}}}
    task = json_task(schema)
    assert VERIFIER.verify(task, '{"port": 80}').passed
    verdict = VERIFIER.verify(task, '{"port": "80"}')
    assert verdict.status == "fail"
    assert verdict.checks[1].name == "schema:0/-/-"
    assert "port" in verdict.checks[1].detail


def test_json_schema_over_multi_document_yaml() -> None:
    task = json_task({"type": "object", "required": ["a"]}, fmt="yaml")
    verdict = VERIFIER.verify(task, "a: 1\n---\nb: 2\n")
    assert [c.passed for c in verdict.checks] == [True, True, False]


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "no-such-type"},
        {"$schema": "https://example.com/my-draft", "type": "object"},
        {"$ref": "http://127.0.0.1:9/remote.json"},
    ],
)
def test_bad_task_schema_is_a_task_error(schema: dict[str, Any]) -> None:
    verdict = VERIFIER.verify(json_task(schema), "{}")
    assert verdict.status == "error"
    assert verdict.detail.startswith("task: ")


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("network access attempted")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)


@pytest.mark.usefixtures("no_network")
def test_no_network_for_kubernetes_or_remote_refs() -> None:
    """In this process (where the sockets are patched), with the schema caches empty."""
    schema_checks.kubernetes_validator.cache_clear()
    schema_checks.cached_json_schema_validator.cache_clear()
    assert judge(spec(k8s_task(LIMITS)), DEPLOYMENT).passed
    remote = judge(spec(json_task({"$ref": "https://example.com/s.json"})), "{}")
    assert remote.status == "error" and "unresolvable" in remote.detail


def test_json_format_rejects_yaml() -> None:
    verdict = VERIFIER.verify(json_task({"type": "object"}), "a: 1\n")
    assert verdict.status == "error"
    assert verdict.checks[0].name == "parse" and not verdict.checks[0].passed


def test_malformed_policies_are_a_task_error() -> None:
    verdict = VERIFIER.verify(
        k8s_task([{"id": "x", "op": "in", "path": "a", "value": 1}]), DEPLOYMENT
    )
    assert verdict.status == "error"
    assert "in needs a list" in verdict.detail


# ------------------------------------------------------------------ hostile inputs
LAUGHS = "a: &a [x,x,x,x,x,x,x,x,x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{','.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(8)
)
MERGE_BOMB = "a: &a {x: 1, y: 2}\n" + "".join(
    f"m{i}: &m{i} {{<<: [{', '.join(['*' + ('a' if i == 0 else f'm{i - 1}')] * 10)}]}}\n"
    for i in range(8)
)
HOSTILE = {  # case -> (text, what the verdict detail must name)
    "billion_laughs": (LAUGHS, "nodes once aliases are expanded"),
    "merge_key_bomb": (MERGE_BOMB, "nodes once aliases are expanded"),
    "recursive_alias": ("a: &a [*a]\n", "recursive alias"),
    "deep_flow_10k": ("[" * 10_000 + "]" * 10_000, "nesting"),
    "deep_block_10k": ("".join(" " * i + "a:\n" for i in range(0, 1400)), "nesting"),
    "deep_via_alias": ("a: &a " + "[" * 60 + "]" * 60 + "\nb: " + "[" * 10 + "*a" + "]" * 10,
                       "deeper than max_depth"),
    "python_object_tag": ("!!python/object/apply:os.system ['touch {marker}']\n", "not allowed"),
    "python_name_tag": ("a: !!python/name:os.system\n", "not allowed"),
    "local_tag": ("kind: !Deployment x\n", "not allowed"),
    "huge_50mb": ("a: " + "x" * 50_000_000, "max_bytes"),
    "wrong_kind": ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\ndata: {a: b}\n",
                   "no document of kind"),
}  # fmt: skip


@pytest.fixture(params=["libyaml", "pure-python"])
def yaml_backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "pure-python":
        monkeypatch.setattr(safe_yaml, "_c_loader_class", lambda: None)
    return str(request.param)


@pytest.mark.usefixtures("yaml_backend")
@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_yaml_is_contained(case: str, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    text, reason = HOSTILE[case]
    text = text.replace("{marker}", str(marker))
    tracemalloc.start()
    try:
        verdict = judge(spec(k8s_task(LIMITS)), text)  # here: the backend and memory are seen
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert not verdict.passed
    assert verdict.status == ("fail" if case == "wrong_kind" else "error"), verdict.detail
    assert reason in verdict.detail
    if case in ("billion_laughs", "merge_key_bomb", "huge_50mb", "deep_via_alias"):
        assert verdict.limit_hit in ("max_nodes", "max_bytes", "max_depth")
    assert peak < MEMORY_BUDGET
    assert not marker.exists()


@pytest.mark.parametrize(
    "text",
    ["[" * 10_000 + "]" * 10_000, '{"a": ' * 5_000 + "1" + "}" * 5_000, "a" * 50_000_000],
    ids=["deep_list", "deep_object", "huge"],
)
def test_hostile_json_is_contained(text: str) -> None:
    tracemalloc.start()
    try:
        verdict = judge(spec(json_task({"type": "object"})), text)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert verdict.status == "error"
    assert ("max_depth" if len(text) < 1_000_000 else "max_bytes") in verdict.detail
    assert peak < MEMORY_BUDGET


# ------------------------------------------------------------------ the loader
def test_yaml_multi_document_drops_empty_documents() -> None:
    assert load_yaml("---\na: 1\n---\n---\n# c\n---\n- 2\n", 1000, 8) == [{"a": 1}, [2]]


def test_yaml_timestamps_and_equals_stay_strings() -> None:
    assert load_yaml("d: 2024-01-01\ne: =\n", 1000, 8) == [{"d": "2024-01-01", "e": "="}]


def test_yaml_merge_keys_within_caps() -> None:
    docs = load_yaml("a: &a {x: 1, y: 2}\nb: {<<: *a, y: 3}\n", 1000, 8)
    assert docs == [{"a": {"x": 1, "y": 2}, "b": {"x": 1, "y": 3}}]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: 1\na: 2\n", "duplicate key"),
        ("on: 1\n", "not a string"),
        ("? [a]\n: 1\n", "not a string"),
        ("a: !!binary aGk=\n", "not allowed"),
        ("a: !!set {x}\n", "not allowed"),
        ("a: [\n", "line"),
    ],
)
def test_yaml_rejects(text: str, message: str) -> None:
    with pytest.raises(ConfigLoadError, match=message):
        load_yaml(text, 1000, 8)


def test_yaml_node_cap_counts_alias_expansion() -> None:
    text = "a: &a [1, 2, 3, 4]\nb: [*a, *a, *a]\n"
    assert load_yaml(text, 1000, 8, max_nodes=30)
    with pytest.raises(ConfigLoadError, match="nodes"):
        load_yaml(text, 1000, 8, max_nodes=20)


def test_depth_cap_is_exact() -> None:
    assert load_yaml("[[[1]]]", 100, 3) == [[[[1]]]]
    assert load_json('{"a": [[1]], "s": "[[[[["}', 100, 3)
    with pytest.raises(ConfigLoadError, match="max_depth"):
        load_yaml("[[[[1]]]]", 100, 3)
    with pytest.raises(ConfigLoadError, match="max_depth"):
        load_json("[[[[1]]]]", 100, 3)


@pytest.mark.parametrize(
    ("text", "message"),
    [('{"a": 1, "a": 2}', "duplicate"), ('{"a": NaN}', "NaN"), ("", "empty"), ("{} {}", "Extra")],
)
def test_json_rejects(text: str, message: str) -> None:
    with pytest.raises(ConfigLoadError, match=message):
        load_json(text, 1000, 8)


def test_byte_cap_counts_utf8_bytes() -> None:
    with pytest.raises(ConfigLoadError, match="max_bytes"):
        load_yaml("a: " + "é" * 10, 20, 8)


# ------------------------------------------------------------------ the policy evaluator
POD = {
    "kind": "Pod",
    "metadata": {"name": "api", "labels": {"app.kubernetes.io/name": "api"}},
    "spec": {
        "securityContext": {"runAsUser": 1000, "runAsNonRoot": True},
        "volumes": [],
        "nodeName": None,
        "containers": [
            {"name": "a", "image": "x:1.0",
             "resources": {"limits": {"memory": "512Mi", "cpu": "500m"}}},
            {"name": "b", "image": "y:2.0", "resources": {"limits": {"memory": "1Gi", "cpu": 2}}},
        ],
    },
}  # fmt: skip


@pytest.mark.parametrize(
    ("op", "path", "value", "passed"),
    [
        ("exists", "spec.containers[*].resources.limits.memory", None, True),
        ("exists", "spec.containers[*].resources.requests.memory", None, False),
        ("absent", "spec.containers[*].securityContext.privileged", None, True),
        ("absent", "spec.containers[*].name", None, False),
        ("equals", "spec.securityContext.runAsNonRoot", True, True),
        ("equals", "spec.securityContext.runAsUser", True, False),
        ("equals", "metadata", {"name": "api", "labels": {"app.kubernetes.io/name": "api"}}, True),
        ("not_equals", "spec.containers[*].name", "c", True),
        ("not_equals", "spec.containers[*].name", "a", False),
        ("in", "spec.containers[*].name", ["a", "b"], True),
        ("in", "spec.containers[*].name", ["a"], False),
        ("matches", "spec.containers[*].image", r"^[a-z]+:\d+\.\d+$", True),
        ("matches", "spec.containers[*].image", r"^x:", False),
        ("matches", "spec.securityContext.runAsUser", r"1000", False),
        ("lte", "spec.containers[*].resources.limits.memory", "1Gi", True),
        ("lte", "spec.containers[*].resources.limits.memory", "1000Mi", False),
        ("gte", "spec.containers[*].resources.limits.cpu", "0.5", True),
        ("gte", "spec.containers[*].resources.limits.cpu", 1, False),
        ("gte", "spec.securityContext.runAsUser", 1000, True),
        ("lte", "spec.securityContext.runAsNonRoot", 1, False),
        ("equals", 'metadata.labels["app.kubernetes.io/name"]', "api", True),
        ("equals", "spec.containers[1].name", "b", True),
        ("exists", "spec.containers[5].name", None, False),
    ],
)
def test_policy_ops(op: str, path: str, value: Any, passed: bool) -> None:
    result = evaluate(policy(op, path, value), [POD])
    assert result.passed is passed, result.detail
    assert result.name == "policy:p"


@pytest.mark.parametrize(("op", "passed"), [("absent", True), ("exists", False), ("equals", False)])
def test_wildcard_over_empty_list_passes_only_absent(op: str, passed: bool) -> None:
    assert evaluate(policy(op, "spec.volumes[*].name", "v"), [POD]).passed is passed


@pytest.mark.parametrize("op", ["exists", "equals", "not_equals", "in", "matches", "lte", "gte"])
def test_missing_path_fails_every_op_but_absent(op: str) -> None:
    value = {"in": ["x"], "matches": "x", "lte": 1, "gte": 1}.get(op, "x")
    assert not evaluate(policy(op, "spec.nothing.here", value), [POD]).passed
    assert evaluate(policy("absent", "spec.nothing.here"), [POD]).passed


def test_null_counts_as_unset() -> None:
    assert evaluate(policy("absent", "spec.nodeName"), [POD]).passed
    assert not evaluate(policy("exists", "spec.nodeName"), [POD]).passed


def test_kinds_filter_and_no_matching_document() -> None:
    other = {"kind": "Service", "metadata": {"name": "api"}}
    assert evaluate(policy("exists", "spec.containers", kinds=["Pod"]), [other, POD]).passed
    result = evaluate(policy("absent", "spec.ingress", kinds=["NetworkPolicy"]), [POD])
    assert not result.passed and "no document of kind" in result.detail


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("512Mi", Fraction(512 * 2**20)),
        ("1Gi", Fraction(2**30)),
        ("500m", Fraction(1, 2)),
        ("2", Fraction(2)),
        ("1.5", Fraction(3, 2)),
        ("1e3", Fraction(1000)),
        ("1E", Fraction(10**18)),
        ("2k", Fraction(2000)),
        ("0.5e-3", Fraction(1, 2000)),
        (".5Ki", Fraction(512)),
    ],
)
def test_parse_quantity(text: str, value: Fraction) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["abc", "1e", "Mi", "1 Mi", "1e99999", "1" * 100])
def test_parse_quantity_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_quantity(text)


def test_quantities_compare_across_units() -> None:
    doc = {"m": "1536Mi", "c": "1500m"}
    assert evaluate(policy("gte", "m", "1.5Gi"), [doc]).passed
    assert evaluate(policy("lte", "m", "1.5Gi"), [doc]).passed
    assert evaluate(policy("gte", "c", 1.5), [doc]).passed
    assert not evaluate(policy("gte", "c", "2"), [doc]).passed


@pytest.mark.parametrize(
    ("path", "ok"),
    [("a.b[*].c", True), ("[*].x", True), ('a["b.c"]', True), ("a[0][1]", True),
     ("a..b", False), ("a.", False), (".a", False), ("a[x]", False), ("", False)],
)  # fmt: skip
def test_parse_path(path: str, ok: bool) -> None:
    if ok:
        assert parse_path(path)
    else:
        with pytest.raises(ValueError):
            parse_path(path)


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ({"op": "in", "value": "x"}, "needs a list"),
        ({"op": "matches", "value": "("}, "valid regex"),
        ({"op": "lte", "value": "big"}, "number or quantity"),
        ({"op": "equals"}, "needs a value"),
        ({"op": "exists", "path": "a..b"}, "expected a key"),
    ],
)
def test_policy_problems(raw: dict[str, Any], problem: str) -> None:
    check = PolicyCheck(**{"id": "p", "path": "a", **raw})
    assert problem in " ".join(policy_problems([check]))


def test_duplicate_policy_ids_are_a_problem() -> None:
    checks = [PolicyCheck(id="p", path="a", op="exists")] * 2
    assert policy_problems(checks) == ["duplicate policy id 'p'"]
