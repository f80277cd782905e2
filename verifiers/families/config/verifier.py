"""The configuration-file verifier: YAML/JSON checked against a schema and declared policies.

The candidate is data, not code, so it is judged in this process with no sandbox: loading is
bounded while it happens (``safe_yaml``: byte, depth and alias-expanded node caps,
core YAML tags only, so nothing is ever executed or imported), and every later step walks a
tree of at most those many nodes. Checks, in order, one ``CheckResult`` each:

- ``parse``: the text loads within ``ConfigSpec.max_bytes`` / ``max_depth``; if not, the
  verdict is ``error`` (so are an empty text and a stream with no non-empty document);
- ``schema:<i>/<kind>/<name>`` for document i (0-based, empty YAML documents dropped):
  ``kubernetes``: the strict OpenAPI schema shipped offline by ``kubernetes-validate`` for
  exactly ``kubernetes_version`` ("1.29" or "v1.29.3" -> 1.29; a version the package does not
  ship is a task problem, not a fallback to another one); an unknown kind/apiVersion fails
  the check. ``jsonschema``: the task's schema, with the draft its ``$schema`` names (2020-12
  when absent), ``$ref`` resolved only inside the schema, ``format`` as annotation only;
- ``policy:<id>`` for each policy (semantics in ``verifiers.families.config.policies``).

Verdict: every check passes -> ``pass``; otherwise ``fail`` with ``tests_passed`` /
``tests_total`` counted over all checks listed. A broken task (invalid JSON Schema, a
Kubernetes version not shipped, malformed policies) gives ``error`` with a ``task:`` detail,
so the reference gate rejects it with that reason.

It does NOT guard against: CPU time and memory as such (nothing here sets a timer or rlimit;
both are bounded only through the caps); catastrophic backtracking in a task's regexes
(``pattern`` in a JSON Schema, ``matches`` policies) on candidate strings; Kubernetes rules
beyond the OpenAPI schema (CEL / ``x-kubernetes-validations``, selector-template label
agreement, admission policies, CRDs: a manifest that passes may still be refused by an API
server); resources wrapped in a ``kind: List`` (policies do not look inside ``items``, so such
a candidate fails rather than passes); and policies that do not capture what the prompt asks.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from typing import Any, cast

import jsonschema
import kubernetes_validate
from jsonschema.exceptions import best_match
from kubernetes_validate.utils import all_versions
from referencing import Registry
from referencing.exceptions import Unresolvable

from schemas import CheckResult, ConfigSpec, TaskRecord, Verdict
from verifiers.families.base import Verifier
from verifiers.families.config import policies
from verifiers.families.config.safe_yaml import ConfigLoadError, load_documents

_KIND = re.compile(r"[A-Za-z][A-Za-z0-9]{0,62}")
_API_VERSION = re.compile(r"(?:[a-z0-9][a-z0-9.-]{0,251}/)?v[0-9]+(?:(?:alpha|beta)[0-9]+)?")
_DETAIL = 300


class TaskProblem(Exception):
    """The task itself is broken (schema, version or policies); says nothing of a solution."""


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


def _doc_label(index: int, doc: Any) -> str:
    kind = doc.get("kind") if isinstance(doc, dict) else None
    meta = doc.get("metadata") if isinstance(doc, dict) else None
    name = meta.get("name") if isinstance(meta, dict) else None
    kind = kind[:64] if isinstance(kind, str) else "-"
    return f"schema:{index}/{kind}/" + (name[:64] if isinstance(name, str) else "-")


def _error_text(e: jsonschema.ValidationError) -> str:
    where = "/".join(str(p) for p in e.absolute_path) or "<root>"
    message = e.message if len(e.message) <= 160 else f"fails the {e.validator!r} keyword"
    return f"{where}: {message}"[:_DETAIL]


def check_kubernetes(doc: Any, version: str) -> tuple[bool, str]:
    """Validate one document against the strict Kubernetes schema; (passed, detail)."""
    if not isinstance(doc, dict):
        return False, f"not a mapping but {type(doc).__name__}"
    kind, api = doc.get("kind"), doc.get("apiVersion")
    if not isinstance(kind, str) or not _KIND.fullmatch(kind):
        return False, f"missing or malformed kind: {kind!r}"[:_DETAIL]
    if not isinstance(api, str) or not _API_VERSION.fullmatch(api):
        return False, f"missing or malformed apiVersion: {api!r}"[:_DETAIL]
    try:
        kubernetes_validate.validate(doc, version, strict=True)
    except kubernetes_validate.ValidationError as e:
        return False, _error_text(e)
    except kubernetes_validate.SchemaNotFoundError:
        return False, f"unknown kind {kind} for apiVersion {api} in Kubernetes {version}"
    return True, f"valid {api} {kind} (Kubernetes {version})"


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
        raise TaskProblem(f"invalid json_schema: {_error_text(e)}") from None
    # An explicit empty registry: $refs resolve inside the schema only, never over the network.
    return cls(schema, registry=Registry())


def check_json_schema(doc: Any, validator: Any) -> tuple[bool, str]:
    """Validate one document against the task's JSON Schema; (passed, detail)."""
    try:
        errors = list(validator.iter_errors(doc))
    except Unresolvable as e:
        raise TaskProblem(f"json_schema has an unresolvable $ref: {e}"[:_DETAIL]) from None
    if not errors:
        return True, "valid"
    more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
    best = best_match(errors)
    assert best is not None
    return False, _error_text(best) + more


class ConfigVerifier(Verifier):
    """Judges YAML/JSON configuration solutions for ``config`` tasks (no sandbox needed)."""

    family = "config"

    def verify(self, task: TaskRecord, solution: str) -> Verdict:
        """Parse, schema-check and policy-check ``solution``; never raises for it."""
        spec = task.verifier
        if not isinstance(spec, ConfigSpec):
            return Verdict(status="infra_error", detail=f"not a config task: {spec.family}")
        t0 = time.monotonic()
        try:
            verdict = self._verify(spec, solution)
        except TaskProblem as e:
            verdict = Verdict(status="error", detail=f"task: {e}"[:_DETAIL])
        except RecursionError:
            verdict = Verdict(status="error", detail="document nested too deeply to validate")
        except Exception as e:  # a bug or broken install in the validators, not the solution
            verdict = Verdict(status="infra_error", detail=f"{type(e).__name__}: {e}"[:_DETAIL])
        verdict.duration_s = time.monotonic() - t0
        return verdict

    def _verify(self, spec: ConfigSpec, solution: str) -> Verdict:
        problems = policies.policy_problems(spec.policies)
        if problems:
            raise TaskProblem("; ".join(problems))
        check = self._schema_check(spec)
        try:
            docs = load_documents(solution, spec.format, spec.max_bytes, spec.max_depth)
            if not docs:
                raise ConfigLoadError("no document (empty text)")
        except ConfigLoadError as e:
            parse = CheckResult(name="parse", passed=False, detail=str(e)[:_DETAIL])
            return Verdict(
                status="error",
                tests_total=1,
                detail=f"parse: {e}"[:_DETAIL],
                checks=[parse],
                limit_hit=e.limit,
            )
        checks = [CheckResult(name="parse", passed=True, detail=f"{len(docs)} documents")]
        for i, doc in enumerate(docs):
            ok, detail = check(doc)
            checks.append(CheckResult(name=_doc_label(i, doc), passed=ok, detail=detail))
        checks.extend(policies.evaluate(p, docs) for p in spec.policies)
        passed = sum(c.passed for c in checks)
        failed = [c for c in checks if not c.passed]
        detail = "; ".join(f"{c.name}: {c.detail}" for c in failed[:3])
        return Verdict(
            status="fail" if failed else "pass",
            tests_passed=passed,
            tests_total=len(checks),
            detail=(detail or f"{len(checks)} checks passed")[:_DETAIL],
            checks=checks,
        )

    @staticmethod
    def _schema_check(spec: ConfigSpec) -> Callable[[Any], tuple[bool, str]]:
        """The per-document schema check for ``spec``; raises TaskProblem if it cannot exist."""
        if spec.schema_kind == "kubernetes":
            version = kubernetes_version(spec.kubernetes_version or "")
            return lambda doc: check_kubernetes(doc, version)
        validator = json_schema_validator(spec.json_schema or {})
        return lambda doc: check_json_schema(doc, validator)

    def trivial_solutions(self, task: TaskRecord) -> list[str]:
        """Empty text, ``{}``, and a bare document of the reference's kind without policy fields."""
        spec = task.verifier
        out = ["", "{}"]
        if not isinstance(spec, ConfigSpec) or spec.schema_kind != "kubernetes":
            return out
        try:
            ref = load_documents(
                task.reference_solution, spec.format, spec.max_bytes, spec.max_depth
            )
        except ConfigLoadError:
            return out
        for doc in ref:
            if isinstance(doc, dict) and "kind" in doc and "apiVersion" in doc:
                meta = doc.get("metadata")
                bare: dict[str, Any] = {"apiVersion": doc["apiVersion"], "kind": doc["kind"]}
                if isinstance(meta, dict) and isinstance(meta.get("name"), str):
                    bare["metadata"] = {"name": meta["name"]}
                text = json.dumps(bare)  # JSON is valid YAML too
                if text not in out:
                    out.append(text)
        return out
