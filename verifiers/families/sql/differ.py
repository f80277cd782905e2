"""The SQL family's differ: AST mutants of the reference query, varied databases as probes.

- ``mutants``: single-node edits of DuckDB's own parse tree (``sql.mutate``); a mutant that
  renders like the reference, or does not parse again, is not returned. The order is a
  shuffle of all edits by ``seed``, taken round-robin over operators so a cap keeps variety.
- ``probes``: databases the task's own checks do not use: the worker's perturbed copies with
  seeds the verifier does not run (1-2 are the verifier's own when ``perturb`` is on), and the
  NULL / duplicate / empty variations of ``sql.variations`` (``salt`` = ``seed``). Payload:
  ``{"seed": s, "vary": kind or null, "index": i, "salt": n}``.
- ``observe``: every solution on every probe in sandboxed DuckDB workers
  (``worker_process.Worker``): the first solution (the reference, by the detectors' convention)
  in a worker of its own, the others in a second one, so expected values never come from a
  process that ran other SQL. An observation is ``{"columns": [...], "rows": [...]}`` with the
  worker's typed encoding; an error is its kind (``syntax``, ``runtime``, ``timeout``,
  ``crash``...). A variation whose SQL fails gives ``setup`` for everyone (an invalid probe); a
  worker that cannot start, or the task's own setup failing, raises ``ProbeInfraError``.
- ``agree``: ``sql.compare.compare_results`` under the task's ``compare`` settings (ordered,
  multiset, float tolerance, column names); two errors agree when their kinds do.

It does NOT guard against: probes that happen to leave a table unchanged (nothing to vary),
mutants DuckDB renders differently but that mean the same (the detector runs them), or the
worker's own limits (see ``sql.verifier``).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from tasksieve.schemas import SqlSpec, TaskRecord
from tasksieve.verifiers.families.probes import Mutant, Observation, Probe, ProbeInfraError
from tasksieve.verifiers.families.sql import mutate, variations
from tasksieve.verifiers.families.sql.compare import Result, compare_results, decode, decode_rows
from tasksieve.verifiers.families.sql.worker_process import Worker, WorkerGone
from tasksieve.verifiers.sandbox.base import Sandbox

WORKER_MEMORY_MB = 2048
_LABELS = {
    "nulls": "NULLs in nullable non-key columns",
    "duplicates": "rows duplicated in tables without keys",
    "empty": "every table empty",
    "empty_one": "one unreferenced table empty",
}


def _spec(task: TaskRecord) -> SqlSpec:
    if not isinstance(task.verifier, SqlSpec):
        raise ValueError(f"not an sql task: {task.verifier.family}")
    return task.verifier


def round_robin(found: list[mutate.Edit], limit: int, seed: int) -> list[mutate.Edit]:
    """Edits shuffled by ``seed`` then taken one operator at a time, at most ``limit``."""
    rng = random.Random(seed)
    by_op: dict[str, list[mutate.Edit]] = {}
    for e in found:
        by_op.setdefault(e.operator, []).append(e)
    for edits in by_op.values():
        rng.shuffle(edits)
    ops = sorted(by_op)
    rng.shuffle(ops)
    out: list[mutate.Edit] = []
    while len(out) < len(found):
        for op in ops:
            if by_op[op]:
                out.append(by_op[op].pop(0))
    return out[: max(0, limit) * 3]  # spare ones: some may render like the reference


class SqlDiffer:
    """Mutants, probes and observations for ``sql`` tasks (see the module docstring)."""

    family = "sql"

    def __init__(self, python: str | None = None) -> None:
        self.python = python

    def mutants(self, task: TaskRecord, limit: int, seed: int) -> list[Mutant]:
        """At most ``limit`` AST mutants of the reference query, deterministic for ``seed``."""
        _spec(task)
        try:
            tree = mutate.parse(task.reference_solution)
            base = mutate.unparse(tree)
        except Exception:  # not one SELECT DuckDB can serialise (SqlParseError), or no DuckDB
            return []
        out: list[Mutant] = []
        seen = {base, task.reference_solution.strip()}
        for edit in round_robin(mutate.edits(tree), limit, seed):
            if len(out) >= limit:
                break
            try:
                text = mutate.unparse(mutate.apply(tree, edit))
                mutate.parse(text)  # must parse again
            except Exception:
                continue
            if text not in seen:
                seen.add(text)
                out.append(Mutant(edit.operator, edit.where, text))
        return out

    def probes(self, task: TaskRecord, limit: int, seed: int) -> list[Probe]:
        """Perturbed copies the checks do not use, then NULL / duplicate / empty variations."""
        spec = _spec(task)
        first = 3 if spec.perturb else 1
        plan: list[tuple[str, dict[str, Any]]] = [
            (f"perturbed copy {first}", {"seed": first, "vary": None}),
            (_LABELS["nulls"], {"seed": 0, "vary": "nulls"}),
            (f"perturbed copy {first + 1}", {"seed": first + 1, "vary": None}),
            (_LABELS["duplicates"], {"seed": 0, "vary": "duplicates"}),
            (_LABELS["empty"], {"seed": 0, "vary": "empty"}),
            (f"perturbed copy {first + 2}", {"seed": first + 2, "vary": None}),
            (f"{_LABELS['empty_one']} (#1)", {"seed": 0, "vary": "empty_one", "index": 0}),
            (f"perturbed copy {first + 1} + NULLs", {"seed": first + 1, "vary": "nulls"}),
            (f"{_LABELS['empty_one']} (#2)", {"seed": 0, "vary": "empty_one", "index": 1}),
            (f"perturbed copy {first + 2} + duplicates", {"seed": first + 2, "vary": "duplicates"}),
        ]
        out = []
        for label, payload in plan[: max(0, limit)]:
            payload = {"index": 0, **payload, "salt": seed}
            out.append(Probe(label, payload, origin="variation"))
        return out

    def observe(
        self, task: TaskRecord, solutions: Sequence[str], probes: Sequence[Probe], sandbox: Sandbox
    ) -> list[list[Observation]]:
        """``result[i][j]``: the rows ``solutions[i]`` returned on ``probes[j]``."""
        spec = _spec(task)
        if not solutions or not probes:
            return [[] for _ in solutions]
        run = _Runner(sandbox, self.python or sandbox.python, spec)
        try:
            tables = variations.catalog(*run.catalog())
            setups = [_setup(spec, p, tables) for p in probes]
            return [
                [
                    run.observe(i, sol, setup, int(p.payload["seed"]))
                    for p, setup in zip(probes, setups, strict=True)
                ]
                for i, sol in enumerate(solutions)
            ]
        finally:
            run.close()

    def agree(self, task: TaskRecord, a: Observation, b: Observation) -> bool:
        """Whether two observations are the same answer under the task's compare settings."""
        if not (a.ok and b.ok):
            return a.ok == b.ok and a.value == b.value
        ra, rb = _result(a), _result(b)
        rules = _spec(task).compare
        return compare_results(ra, rb, rules) is None and compare_results(rb, ra, rules) is None


def _result(o: Observation) -> Result:
    import json

    data = json.loads(o.value)
    return Result([str(c) for c in data["columns"]], decode_rows(list(data["rows"])))


def _setup(spec: SqlSpec, probe: Probe, tables: list[variations.Table]) -> tuple[str, bool]:
    """The setup SQL for a probe, and whether it adds a variation to the task's own."""
    kind = probe.payload.get("vary")
    if not kind:
        return spec.setup_sql, False
    extra = variations.variation_sql(
        str(kind), tables, int(probe.payload.get("salt", 0)), int(probe.payload.get("index", 0))
    )
    if not extra:
        return spec.setup_sql, False
    return f"{spec.setup_sql.rstrip().rstrip(';')};\n{extra};", True


class _Runner:
    """Two sandboxed workers for one ``observe`` call: the first solution's and the others'."""

    def __init__(self, sandbox: Sandbox, python: str, spec: SqlSpec) -> None:
        self.sandbox, self.python, self.spec = sandbox, python, spec
        self.memory = max(WORKER_MEMORY_MB, spec.memory_mb + 1024)
        self.workers: dict[int, Worker | None] = {0: None, 1: None}

    def _worker(self, role: int) -> Worker:
        w = self.workers[role]
        if w is None or not w.healthy():
            if w is not None:
                w.close()
            try:
                w = Worker(self.sandbox, self.python, self.memory)
            except Exception as e:
                raise ProbeInfraError(f"SQL worker did not start: {e}") from e
            self.workers[role] = w
        return w

    def _request(self, role: int, query: str, setup: str, seed: int) -> dict[str, Any]:
        req = {
            "setup_sql": setup,
            "files": self.spec.files,
            "seed": seed,
            "query": query,
            "timeout_s": self.spec.timeout_s,
            "memory_mb": self.spec.memory_mb,
            "threads": 1,
            "max_rows": 100_000,
            "max_bytes": 32_000_000,
        }
        worker = self._worker(role)
        try:
            return worker.request(req)
        except WorkerGone as e:
            worker.close()
            self.workers[role] = None
            if e.phase != "query":
                return {"ok": False, "stage": "setup", "kind": "infra", "error": e.tail}
            kind = "timeout" if e.timed_out else "crash"
            return {"ok": False, "stage": "query", "kind": kind, "error": e.tail}

    def catalog(self) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
        """The task's tables and constraints, read by the first solution's worker."""
        out = []
        for q in (variations.CATALOG_QUERY, variations.CONSTRAINTS_QUERY):
            msg = self._request(0, q, self.spec.setup_sql, 0)
            if msg.get("ok") is not True:
                raise ProbeInfraError(f"task setup failed: {str(msg.get('error'))[:300]}")
            out.append([tuple(decode(v) for v in r) for r in msg.get("rows") or []])
        return out[0], out[1]

    def observe(self, index: int, query: str, setup: tuple[str, bool], seed: int) -> Observation:
        """One solution on one probe's database."""
        msg = self._request(0 if index == 0 else 1, query, setup[0], seed)
        if msg.get("ok") is True:
            return Observation.of({"columns": msg.get("columns") or [], "rows": msg["rows"]})
        if msg.get("stage") == "setup":
            if not setup[1]:
                raise ProbeInfraError(f"task setup failed: {str(msg.get('error'))[:300]}")
            return Observation(False, "setup")
        return Observation(False, str(msg.get("kind", "runtime")))

    def close(self) -> None:
        for w in self.workers.values():
            if w is not None:
                w.close()
