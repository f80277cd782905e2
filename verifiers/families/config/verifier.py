"""The configuration-file verifier: YAML/JSON checked against a schema and declared policies.

The candidate is data, not code, so it needs no sandbox; it is judged in warm worker processes
of this host (``config.worker``, at most ``ConfigLimits.max_workers``) under a wall-clock bound
per verification, ``ConfigLimits.timeout_s``. Checks, in order, one ``CheckResult`` each:

- ``parse``: the text loads within ``ConfigSpec.max_bytes`` / ``max_depth`` (``safe_yaml``:
  byte, depth and alias-expanded node caps, core YAML tags only, so nothing is ever executed or
  imported); if not, the verdict is ``error`` (so are an empty text and a stream with no
  non-empty document);
- ``schema:<i>/<kind>/<name>`` for document i (0-based, empty YAML documents dropped):
  ``kubernetes``: the strict OpenAPI schema shipped offline by ``kubernetes-validate`` for
  exactly ``kubernetes_version`` ("1.29" or "v1.29.3" -> 1.29; a version the package does not
  ship is a task problem, not a fallback to another one); an unknown kind/apiVersion fails
  the check. ``jsonschema``: the task's schema, with the draft its ``$schema`` names (2020-12
  when absent), ``$ref`` resolved only inside the schema, ``format`` as annotation only;
- ``policy:<id>`` for each policy (semantics in ``tasksieve.verifiers.families.config.policies``).

The deploy kinds (``nginx``, ``haproxy``, ``prometheus_rules``) are judged instead by a trial
deployment of the real engine in the sandbox: ``tasksieve.verifiers.families.config.deploy``.

Verdict: every check passes -> ``pass``; otherwise ``fail`` with ``tests_passed`` /
``tests_total`` counted over all checks listed. A broken task (invalid JSON Schema, a
Kubernetes version not shipped, malformed policies, a regex RE2 refuses) gives ``error`` with
a ``task:`` detail naming the policy or schema location, so the reference gate rejects it with
that reason.

Time: every task regex runs on RE2 (``config.regex``: linear, no backtracking), and parsing and
checking are linear in the capped tree, so a verification normally takes milliseconds. The
wall-clock bound catches whatever still overruns (an input near the caps on a slow machine, a
task whose caps are set very high, a pathological path in a library): the worker is killed and
replaced, and the verdict is ``timeout``, charged to the candidate, because the worker was
warm and idle when the clock started and nothing else ran in it, so all the time went to
loading and checking this input (a reference that overruns fails the reference gate). A
worker that cannot start, dies or answers nonsense gives ``infra_error``: the environment is
broken, which says nothing about the candidate.

It does NOT guard against: memory as such (bounded only through the caps); Kubernetes rules
beyond the OpenAPI schema (CEL / ``x-kubernetes-validations``, selector-template label
agreement, admission policies, CRDs: a manifest that passes may still be refused by an API
server); resources wrapped in a ``kind: List`` (policies do not look inside ``items``, so such
a candidate fails rather than passes); and policies that do not capture what the prompt asks.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from tasksieve.schemas import ConfigSpec, TaskRecord, Verdict
from tasksieve.schemas.task import DEPLOY_KINDS
from tasksieve.verifiers.families.base import Verifier
from tasksieve.verifiers.families.config.deploy.verifier import DeployVerifier
from tasksieve.verifiers.families.config.judge import parse_error
from tasksieve.verifiers.families.config.safe_yaml import ConfigLoadError, check_bytes
from tasksieve.verifiers.families.config.workers import WorkerFailed, WorkerPool, WorkerTimeout
from tasksieve.verifiers.sandbox.base import Sandbox

_ROOT = Path(__file__).resolve().parents[3]  # the directory that holds the verifiers package
_WORKER = [sys.executable, "-m", "tasksieve.verifiers.families.config.worker"]
_DETAIL = 300


@dataclass(frozen=True)
class ConfigLimits:
    """Wall-clock bound per verification and the number of warm worker processes.

    ``timeout_s`` covers loading and every check of one candidate; the default is about a
    hundred times what a 1 MB candidate at the default caps takes. ``start_timeout_s`` bounds a
    worker's start (imports), which is not charged to any candidate.
    """

    timeout_s: float = 20.0
    max_workers: int = 4
    start_timeout_s: float = 120.0

    def __post_init__(self) -> None:
        if not self.timeout_s > 0:
            raise ValueError(f"need timeout_s > 0 (seconds per verification), got {self.timeout_s}")
        if self.max_workers < 1:
            raise ValueError(f"need max_workers >= 1 (worker processes), got {self.max_workers}")
        if not self.start_timeout_s > 0:
            raise ValueError(f"need start_timeout_s > 0, got {self.start_timeout_s}")


def _worker_env() -> dict[str, str]:
    env = dict(os.environ)
    paths = [str(_ROOT), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    return env


class ConfigVerifier(Verifier):
    """Judges YAML/JSON configuration solutions for ``config`` tasks (no sandbox needed)."""

    family = "config"

    def __init__(self, sandbox: Sandbox, limits: ConfigLimits | None = None) -> None:
        super().__init__(sandbox)
        self.limits = limits or ConfigLimits()
        self._pool: WorkerPool | None = None
        self._lock = threading.Lock()

    @property
    def pool(self) -> WorkerPool:
        """The warm workers (started on first use)."""
        with self._lock:
            if self._pool is None:
                self._pool = WorkerPool(
                    _WORKER, _worker_env(), self.limits.max_workers, self.limits.start_timeout_s
                )
            return self._pool

    def verify(self, task: TaskRecord, solution: str) -> Verdict:
        """Parse, schema-check and policy-check ``solution`` within the bound; never raises."""
        spec = task.verifier
        if not isinstance(spec, ConfigSpec):
            return Verdict(status="infra_error", detail=f"not a config task: {spec.family}")
        if spec.schema_kind in DEPLOY_KINDS:  # trial deployment in the sandbox
            return DeployVerifier(self.sandbox).verify(task, solution)
        t0 = time.monotonic()
        try:  # the byte cap first, here: no need to ship an oversized text to a worker
            check_bytes(solution, spec.max_bytes)
        except ConfigLoadError as e:
            verdict = parse_error(e)
            verdict.duration_s = time.monotonic() - t0
            return verdict
        request = {"op": "judge", "spec": spec.model_dump_json(), "solution": solution}
        try:
            answer = self.pool.call(request, self.limits.timeout_s)
            if answer.get("ok") is not True:
                raise WorkerFailed(str(answer.get("error")))
            return Verdict.model_validate(answer["verdict"])
        except WorkerTimeout:
            return Verdict(
                status="timeout",
                detail=f"loading and checking took longer than {self.limits.timeout_s:g} s",
                duration_s=time.monotonic() - t0,
                limit_hit="wall",
            )
        except Exception as e:  # the worker could not start, died or answered nonsense
            detail = f"config worker: {type(e).__name__}: {e}"[:_DETAIL]
            return Verdict(status="infra_error", detail=detail, duration_s=time.monotonic() - t0)

    def trivial_solutions(self, task: TaskRecord) -> list[str]:
        """Empty text, ``{}``, and a bare document of the reference's kind without policy fields."""
        spec = task.verifier
        out = ["", "{}"]
        if isinstance(spec, ConfigSpec) and spec.schema_kind in DEPLOY_KINDS:
            return ["", "groups: []\n"] if spec.schema_kind == "prometheus_rules" else [""]
        if not isinstance(spec, ConfigSpec) or spec.schema_kind != "kubernetes":
            return out
        request = {
            "op": "bare",
            "spec": spec.model_dump_json(),
            "reference": task.reference_solution,
        }
        try:
            check_bytes(task.reference_solution, spec.max_bytes)
            answer = self.pool.call(request, self.limits.timeout_s)
        except (ConfigLoadError, WorkerTimeout, WorkerFailed):
            return out  # the reference gate, which runs first, has already reported why
        texts = answer.get("texts") if answer.get("ok") is True else None
        return out + [t for t in texts or [] if isinstance(t, str) and t not in out]

    def close(self) -> None:
        """Stop the warm workers; a later verification starts new ones."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()
