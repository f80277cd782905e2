"""The SQL verifier: candidate queries run in warm, sandboxed DuckDB workers; the verdict here.

Each verifier keeps a small pool of slots (one per concurrently verifying thread). A slot holds
two long-lived sandboxed worker processes (``worker_process``: ``sql_worker.py`` started with
``spawn()``): one that only ever runs reference queries and one for candidates, so expected
values never come from a process that has run candidate SQL. A request gets a locked in-memory
database built from ``setup_sql`` + ``files`` (a worker keeps recent ones for requests with the
same setup, see ``sql_worker``), so a warm verification costs one query. Reference results are
cached here per (task, perturbation). Rows come back as tagged JSON and are compared here
(``sql_compare``). With ``perturb`` the task is also checked on perturbed copies of its tables
(``perturbed_1``...), where the reference is re-run and must agree.

Statuses: match -> pass; wrong rows/columns or an oversized result -> fail; syntax, runtime,
memory or statement-type errors, or a crash while the query runs -> error (engine message in
the detail); over ``timeout_s`` -> timeout; a worker that cannot start, or a setup/reference
that breaks -> infra_error. A worker is recycled after a crash, timeout, memory hit, when half
its CPU budget is used, or after ``worker_process.MAX_REQUESTS``.

It does NOT guard against: a SELECT that changes a reused database outside its rolled-back
transaction in a way ``sql_worker.DatabaseCache`` does not exclude (it excludes sequences);
answers that hard-code the visible data beyond what perturbation catches (a perturbation that
breaks a table's constraints leaves that table unchanged); ordered comparisons on perturbed
copies where the reference's ORDER BY leaves ties; engine bugs that escape DuckDB's own locks
(the sandbox is the next wall); binary data files (``files`` holds text only); or a sandbox
backend's own isolation gaps.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, replace

from tasksieve.schemas import CheckResult, SqlSpec, TaskRecord, Verdict, VerdictStatus
from tasksieve.verifiers.families.base import Verifier
from tasksieve.verifiers.families.sql.compare import Result, compare_results, decode_rows
from tasksieve.verifiers.families.sql.worker_process import Worker, WorkerGone
from tasksieve.verifiers.sandbox.base import Sandbox, sum_cpu
from tasksieve.verifiers.sandbox.support import check_name


@dataclass
class _Slot:
    """The worker pair one verifying thread uses."""

    ref: Worker | None = None
    cand: Worker | None = None


@dataclass(frozen=True)
class _Outcome:
    """A worker's answer to one request, decoded."""

    result: Result | None = None
    kind: str = ""  # error kind when result is None (syntax, runtime, timeout, memory, ...)
    stage: str = ""
    message: str = ""
    limit: str | None = None
    cpu_s: float | None = None  # the worker's CPU time for this answer (None: unknown)


class SqlVerifier(Verifier):
    """Judges SQL (DuckDB) solutions for ``sql`` tasks."""

    family = "sql"

    def __init__(
        self,
        sandbox: Sandbox,
        python: str | None = None,
        perturbations: int = 2,
        threads: int = 1,
        max_rows: int = 100_000,
        max_bytes: int = 32_000_000,
        worker_memory_mb: int = 2048,
        cache_size: int = 1024,
    ) -> None:
        super().__init__(sandbox)
        if perturbations < 0 or threads < 1 or max_rows < 1 or cache_size < 0:
            raise ValueError(
                "need perturbations >= 0, threads >= 1, max_rows >= 1, cache_size >= 0, got "
                f"{perturbations}, {threads}, {max_rows}, {cache_size}"
            )
        self.python = python or sandbox.python
        self.perturbations, self.threads = perturbations, threads
        self.max_rows, self.max_bytes = max_rows, max_bytes
        self.worker_memory_mb, self.cache_size = worker_memory_mb, cache_size
        self._idle: list[_Slot] = []
        self._lock = threading.Lock()
        self._cache: OrderedDict[str, _Outcome] = OrderedDict()

    # ------------------------------------------------------------------ public API
    def verify(self, task: TaskRecord, solution: str) -> Verdict:
        """Run ``solution`` against ``task`` and return the verdict (never raises for it)."""
        spec = task.verifier
        if not isinstance(spec, SqlSpec):
            return Verdict(status="infra_error", detail=f"not an sql task: {spec.family}")
        if not self.sandbox.capabilities.spawn:
            return Verdict(
                status="infra_error",
                tests_total=1,
                detail=f"sandbox {self.sandbox.name!r} cannot start interactive sessions "
                "(needs spawn())",
            )
        t0 = time.monotonic()
        slot = self._take()
        try:
            v = self._verify(spec, solution, slot)
        except Exception as e:  # a bug or broken sandbox here is never the solution's fault
            v = Verdict(status="infra_error", detail=f"verifier failed: {type(e).__name__}: {e}")
        finally:
            self._give(slot)
        v.duration_s = time.monotonic() - t0
        return v

    def trivial_solutions(self, task: TaskRecord) -> list[str]:
        """An empty query, a constant row and an empty result; all must fail a real task."""
        return ["", "SELECT 1", "SELECT NULL WHERE false"]

    def close(self) -> None:
        """Stop every pooled worker."""
        with self._lock:
            slots, self._idle = self._idle, []
        for s in slots:
            for w in (s.ref, s.cand):
                if w is not None:
                    w.close()

    # ------------------------------------------------------------------ checks
    def _verify(self, spec: SqlSpec, solution: str, slot: _Slot) -> Verdict:
        for name in spec.files:
            check_name(name)
        plan = [("original", 0)]
        if spec.perturb and spec.reference_query is not None:
            plan += [(f"perturbed_{i}", i) for i in range(1, self.perturbations + 1)]
        checks: list[CheckResult] = []
        status: VerdictStatus = "pass"
        detail, limit = "", None
        cpu: list[float | None] = []
        for name, seed in plan:
            if status != "pass":
                checks.append(CheckResult(name=name, passed=False, detail="not run"))
                continue
            want = self._expected(spec, seed, slot)
            cpu.append(want.cpu_s)
            if want.result is None:
                why = f"reference failed on {name} ({want.kind}): {want.message}"
                checks.append(CheckResult(name=name, passed=False, detail=why[:500]))
                status, detail = "infra_error", why
                continue
            got = self._run(slot, "cand", spec, solution, seed)
            cpu.append(got.cpu_s)
            if got.result is None:
                status, why = _error_status(got)
                limit = got.limit
            else:
                diff = compare_results(want.result, got.result, spec.compare)
                status, why = ("pass", "") if diff is None else ("fail", diff)
            if status == "pass" and seed == 0:
                why = "matches"
            elif status == "pass":
                why = "matches the reference on perturbed data"
            checks.append(CheckResult(name=name, passed=status == "pass", detail=why[:500]))
            if status != "pass":
                detail = f"{name}: {why}"
        return Verdict(
            status=status,
            tests_passed=sum(c.passed for c in checks),
            tests_total=len(checks),
            detail=detail[:1000],
            checks=checks,
            limit_hit=limit,
            cpu_s=sum_cpu(cpu),
        )

    def _expected(self, spec: SqlSpec, seed: int, slot: _Slot) -> _Outcome:
        if seed == 0 and spec.expected_rows is not None:
            cols = list(spec.expected_columns) if spec.expected_columns is not None else None
            return _Outcome(Result(cols, decode_rows(spec.expected_rows)), cpu_s=0.0)
        assert spec.reference_query is not None
        key = hashlib.sha256(
            json.dumps(
                [spec.setup_sql, spec.files, spec.reference_query, seed, spec.memory_mb],
                sort_keys=True,
            ).encode()
        ).hexdigest()
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                return replace(hit, cpu_s=0.0)  # nothing ran for it now
        out = self._run(slot, "ref", spec, spec.reference_query, seed)
        if self.cache_size and (out.result is not None or out.kind in ("syntax", "runtime")):
            with self._lock:
                self._cache[key] = out
                while len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
        return out

    # ------------------------------------------------------------------ workers
    def _run(self, slot: _Slot, role: str, spec: SqlSpec, query: str, seed: int) -> _Outcome:
        worker = self._worker(slot, role, spec.memory_mb)
        req = {
            "setup_sql": spec.setup_sql,
            "files": spec.files,
            "seed": seed,
            "query": query,
            "timeout_s": spec.timeout_s,
            "memory_mb": spec.memory_mb,
            "threads": self.threads,
            "max_rows": self.max_rows,
            "max_bytes": self.max_bytes,
        }
        try:
            msg = worker.request(req)
        except WorkerGone as e:
            self._drop(slot, role)
            if e.phase != "query":
                kind = "infra_timeout" if e.timed_out else "infra"
                return _Outcome(kind=kind, stage=e.phase, message=e.tail or "worker died")
            if e.timed_out:
                return _Outcome(kind="timeout", stage="query", message="wall clock", limit="wall")
            why = "the engine died while running the query"
            return _Outcome(kind="crash", stage="query", message=why, limit=e.limit or "memory")
        cpu = worker.last_cpu_s
        if msg.get("ok") is True:
            rows = decode_rows(list(msg.get("rows") or []))
            return _Outcome(Result([str(c) for c in msg.get("columns") or []], rows), cpu_s=cpu)
        kind, stage = str(msg.get("kind", "runtime")), str(msg.get("stage", "query"))
        if kind in ("timeout", "memory") or stage == "worker":
            self._drop(slot, role)
        limit = {"timeout": "wall", "memory": "memory"}.get(kind)
        why = str(msg.get("error", ""))
        return _Outcome(kind=kind, stage=stage, message=why, limit=limit, cpu_s=cpu)

    def _worker(self, slot: _Slot, role: str, memory_mb: int) -> Worker:
        w: Worker | None = getattr(slot, role)
        need = max(self.worker_memory_mb, memory_mb + 1024)
        if w is not None and (not w.healthy() or w.memory_mb < need):
            self._drop(slot, role)
            w = None
        if w is None:
            w = Worker(self.sandbox, self.python, need)
            setattr(slot, role, w)
        return w

    def _drop(self, slot: _Slot, role: str) -> None:
        w: Worker | None = getattr(slot, role)
        if w is not None:
            w.close()
            setattr(slot, role, None)

    def _take(self) -> _Slot:
        with self._lock:
            return self._idle.pop() if self._idle else _Slot()

    def _give(self, slot: _Slot) -> None:
        with self._lock:
            self._idle.append(slot)


def _error_status(got: _Outcome) -> tuple[VerdictStatus, str]:
    """The status and detail for a candidate query that produced no rows."""
    if got.kind in ("infra", "infra_timeout") or got.stage in ("setup", "worker"):
        return "infra_error", f"{got.stage} failed ({got.kind}): {got.message}"
    if got.kind == "timeout":
        return "timeout", "query exceeded its time limit"
    if got.kind == "too_large":
        return "fail", got.message
    label = {
        "syntax": "syntax error",
        "memory": "out of memory",
        "crash": "engine crash",
        "statements": "rejected",
        "not_select": "rejected",
    }.get(got.kind, "runtime error")
    return "error", f"{label}: {got.message}"
