"""The whole judgement of one config candidate, in this process: parse, schema and policy checks.

``judge`` is what the verifier's worker processes run (``config.worker``); it is also usable
directly where no wall-clock bound is wanted (tests that measure memory in this process).
Checks, their order and the verdict rules are described in ``config.verifier``.

It does NOT guard against: time (nothing here has a timer; the caps bound the tree and RE2
bounds each regex, the caller bounds the wall clock) or memory beyond what the caps imply.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from tasksieve.schemas import CheckResult, ConfigSpec, Verdict
from tasksieve.verifiers.families.config import policies
from tasksieve.verifiers.families.config.regex import RegexRejected
from tasksieve.verifiers.families.config.safe_yaml import ConfigLoadError, load_documents
from tasksieve.verifiers.families.config.schema_checks import (
    TaskProblem,
    cached_json_schema_validator,
    check_json_schema,
    check_kubernetes,
    kubernetes_version,
)

_DETAIL = 300
SchemaCheck = Callable[[Any], tuple[bool, str]]


def judge(spec: ConfigSpec, solution: str) -> Verdict:
    """Parse, schema-check and policy-check ``solution``; never raises for it.

    A broken task gives ``error`` with a ``task:`` detail; a bug or broken install in the
    validators gives ``infra_error``.
    """
    t0 = time.monotonic()
    try:
        verdict = _judge(spec, solution)
    except TaskProblem as e:
        verdict = Verdict(status="error", detail=f"task: {e}"[:_DETAIL])
    except RegexRejected as e:  # a schema regex reached only through an unusual $ref
        verdict = Verdict(status="error", detail=f"task: {e}"[:_DETAIL])
    except RecursionError:
        verdict = Verdict(status="error", detail="document nested too deeply to validate")
    except Exception as e:
        verdict = Verdict(status="infra_error", detail=f"{type(e).__name__}: {e}"[:_DETAIL])
    verdict.duration_s = time.monotonic() - t0
    return verdict


def schema_check(spec: ConfigSpec) -> SchemaCheck:
    """The per-document schema check for ``spec``; raises TaskProblem if it cannot exist."""
    if spec.schema_kind == "kubernetes":
        version = kubernetes_version(spec.kubernetes_version or "")
        return lambda doc: check_kubernetes(doc, version)
    key = json.dumps(spec.json_schema or {}, sort_keys=True)
    validator = cached_json_schema_validator(key)
    return lambda doc: check_json_schema(doc, validator)


def _doc_label(index: int, doc: Any) -> str:
    kind = doc.get("kind") if isinstance(doc, dict) else None
    meta = doc.get("metadata") if isinstance(doc, dict) else None
    name = meta.get("name") if isinstance(meta, dict) else None
    kind = kind[:64] if isinstance(kind, str) else "-"
    return f"schema:{index}/{kind}/" + (name[:64] if isinstance(name, str) else "-")


def _judge(spec: ConfigSpec, solution: str) -> Verdict:
    problems = policies.policy_problems(spec.policies)
    if problems:
        raise TaskProblem("; ".join(problems))
    check = schema_check(spec)
    try:
        docs = load_documents(solution, spec.format, spec.max_bytes, spec.max_depth)
        if not docs:
            raise ConfigLoadError("no document (empty text)")
    except ConfigLoadError as e:
        return parse_error(e)
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


def parse_error(e: ConfigLoadError) -> Verdict:
    """The ``error`` verdict for a candidate that does not load, with its ``parse`` check."""
    parse = CheckResult(name="parse", passed=False, detail=str(e)[:_DETAIL])
    return Verdict(
        status="error",
        tests_total=1,
        detail=f"parse: {e}"[:_DETAIL],
        checks=[parse],
        limit_hit=e.limit,
    )


def bare_documents(spec: ConfigSpec, reference: str) -> list[str]:
    """For each Kubernetes document of ``reference``: JSON of its apiVersion, kind and name only.

    Empty when the task is not a Kubernetes one or its reference does not load.
    """
    if spec.schema_kind != "kubernetes":
        return []
    try:
        docs = load_documents(reference, spec.format, spec.max_bytes, spec.max_depth)
    except ConfigLoadError:
        return []
    out: list[str] = []
    for doc in docs:
        if isinstance(doc, dict) and "kind" in doc and "apiVersion" in doc:
            meta = doc.get("metadata")
            bare: dict[str, Any] = {"apiVersion": doc["apiVersion"], "kind": doc["kind"]}
            if isinstance(meta, dict) and isinstance(meta.get("name"), str):
                bare["metadata"] = {"name": meta["name"]}
            text = json.dumps(bare)  # JSON is valid YAML too
            if text not in out:
                out.append(text)
    return out
