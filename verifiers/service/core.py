"""The service's state: one sandbox, its verifiers, the scheduler, sessions, idempotency.

``Service.submit`` is the one way work reaches the sandbox: it applies the request's
idempotency key, priority, client and deadline, queues the blocking job on the scheduler and
awaits it without blocking the event loop. The HTTP layer (``tasksieve.verifiers.service.app``) maps
its exceptions to status codes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from tasksieve.schemas import TaskRecord, Verdict
from tasksieve.verifiers.registry import FAMILIES_SUPPORTED, VerifierCache, make_sandbox
from tasksieve.verifiers.sandbox.base import Sandbox
from tasksieve.verifiers.service.config import ServiceConfig
from tasksieve.verifiers.service.idempotency import IdempotencyStore
from tasksieve.verifiers.service.live import LiveSessionStore
from tasksieve.verifiers.service.metrics import Metrics, make_metrics
from tasksieve.verifiers.service.runcode import RunCodeRequest, RunCodeResponse, run_code
from tasksieve.verifiers.service.scheduler import PRIORITIES, Job, QueueFull, Scheduler
from tasksieve.verifiers.service.sessions import SessionStore

DEFAULT_PRIORITY = "curation"


@dataclass(frozen=True)
class Meta:
    """Scheduling facts of one request, from its headers."""

    client: str
    priority: int
    deadline: float | None  # time.monotonic() value
    key: str | None
    fingerprint: str


def parse_priority(value: str | None) -> int:
    """A priority name (training, interactive, curation, batch) or a number; lower runs first."""
    if not value:
        return PRIORITIES[DEFAULT_PRIORITY]
    if value in PRIORITIES:
        return PRIORITIES[value]
    try:
        return int(value)
    except ValueError:
        raise ValueError(
            f"unknown priority {value!r}; use one of {', '.join(PRIORITIES)} or a number"
        ) from None


def parse_deadline(value: str) -> float:
    """Seconds from an ``X-Deadline-S`` value: a finite number > 0, else ValueError."""
    try:
        budget = float(value)
    except ValueError:
        raise ValueError(f"X-Deadline-S must be a number of seconds, got {value[:40]!r}") from None
    if not (math.isfinite(budget) and budget > 0):
        raise ValueError(f"X-Deadline-S must be a finite number > 0, got {value[:40]!r}")
    return budget


def session_store(cfg: ServiceConfig, sandbox: Sandbox) -> SessionStore | LiveSessionStore:
    """Live sessions where the sandbox opens workspaces (or ``live`` is asked for: then a
    sandbox without them is an error), packed ones otherwise or when asked for."""
    can = sandbox.capabilities.workspaces
    if cfg.session_mode == "live" and not can:
        raise ValueError(
            f"--session-mode live: sandbox {sandbox.name!r} opens no workspaces (needs "
            "bubblewrap or unshare namespaces, or docker); use auto or packed"
        )
    if cfg.session_mode == "packed" or not can:
        return SessionStore(sandbox, cfg.max_sessions, cfg.session_max_bytes)
    return LiveSessionStore(
        sandbox, cfg.max_sessions, cfg.session_max_bytes, cfg.max_session_lifetime_s
    )


class Service:
    """Everything one server holds; thread-safe; ``close`` releases the sandbox."""

    def __init__(self, cfg: ServiceConfig, sandbox: Sandbox | None = None) -> None:
        self.cfg = cfg
        self.sandbox = sandbox or make_sandbox(
            cfg.backend, allow_weak_isolation=cfg.allow_weak_isolation
        )
        self.cache = VerifierCache(self.sandbox)
        self.sessions = session_store(cfg, self.sandbox)
        self.reapers: list[Callable[[], object]] = [self.sessions.reap]
        self.closers: list[Callable[[], object]] = []  # extensions' stores, closed first
        self.idem = IdempotencyStore(cfg.idempotency_ttl_s, cfg.idempotency_max)
        self.scheduler = Scheduler(
            cfg.workers, cfg.max_queue, cfg.infra_retries, on_finish=self._finished
        )
        self.metrics: Metrics = make_metrics(
            lambda: self.scheduler.depth,
            lambda: self.scheduler.in_flight,
            lambda: len(self.sessions),
        )
        self._journal_lock = threading.Lock()
        self.closing = False

    def close(self) -> None:
        """Answer every waiting job, then close sessions, verifiers and the sandbox: each step
        runs even when an earlier one raises (the first error is raised at the end)."""
        self.closing = True
        with contextlib.ExitStack() as steps:  # callbacks run last-in first-out
            steps.callback(self.sandbox.close)
            steps.callback(self.cache.close)
            steps.callback(self.sessions.close)
            for close in self.closers:
                steps.callback(close)
            steps.callback(self.scheduler.close)

    # ------------------------------------------------------------------ scheduling
    async def submit(
        self, meta: Meta, kind: str, body: Callable[[], tuple[Any, str | None]]
    ) -> Any:
        """Run ``body`` through the scheduler (once per idempotency key) and return its result.

        Raises ``QueueFull``, ``DeadlineExceeded`` or ``KeyConflict``.
        """
        if meta.key is None:
            return await asyncio.wrap_future(self._enqueue(meta, kind, body))
        shared, first = self.idem.claim(meta.key, meta.fingerprint)
        if first:
            try:
                inner = self._enqueue(meta, kind, body)
            except QueueFull as exc:
                self.idem.forget(meta.key)
                shared.set_exception(exc)
                raise
            inner.add_done_callback(lambda f: self._settle(meta.key, f, shared))
        # A caller that goes away must not cancel the shared run: its retry (same key) or a
        # concurrent twin waits on it. Without a key, going away cancels a job not yet started.
        return await asyncio.shield(asyncio.wrap_future(shared))

    def _enqueue(
        self, meta: Meta, kind: str, body: Callable[[], tuple[Any, str | None]]
    ) -> Future[Any]:
        def counted() -> tuple[Any, str | None]:
            result, infra = body()
            if infra:
                self.metrics.infra_errors.labels(kind).inc()
            return result, infra

        job = Job(counted, meta.priority, meta.client, meta.deadline, kind, meta.key)
        try:
            return self.scheduler.submit(job)
        except QueueFull:
            self.metrics.rejected.labels("queue_full").inc()
            raise

    def _settle(self, key: str | None, inner: Future[Any], shared: Future[Any]) -> None:
        if shared.done():
            return
        if inner.cancelled():
            if key is not None:
                self.idem.forget(key)
            shared.cancel()
            return
        exc = inner.exception()
        if exc is None:
            shared.set_result(inner.result())
            return
        if key is not None:
            self.idem.forget(key)  # it never ran (deadline, shutdown): a retry may run it
        shared.set_exception(exc)

    def _finished(self, job: Job, outcome: str, seconds: float) -> None:
        self.metrics.latency.labels(job.kind).observe(seconds)
        self.metrics.jobs.labels(job.kind, outcome).inc()
        if outcome == "deadline":
            self.metrics.rejected.labels("deadline").inc()
            return
        if job.kind == "verify" and outcome == "infra_error":  # the other statuses: verify_body
            self.metrics.verdicts.labels("infra_error").inc()
        if self.cfg.journal_path and job.key is not None:
            line = json.dumps({"key": job.key, "kind": job.kind, "pid": os.getpid()})
            with self._journal_lock, open(self.cfg.journal_path, "a", encoding="utf-8") as fh:
                fh.write(line + "\n")

    def meta(
        self,
        client: str,
        priority: str | None,
        deadline_s: str | None,
        key: str | None,
        fingerprint: str,
    ) -> Meta:
        """Scheduling facts from header values; raises ValueError for malformed ones."""
        budget = parse_deadline(deadline_s) if deadline_s else self.cfg.default_deadline_s
        deadline = time.monotonic() + budget if budget is not None else None
        if key is not None and not 0 < len(key) <= 200:
            raise ValueError("an Idempotency-Key must be 1 to 200 characters")
        scoped = f"{client}\x00{key}" if key is not None else None
        return Meta(client, parse_priority(priority), deadline, scoped, fingerprint)

    # ------------------------------------------------------------------ job bodies
    def verify_body(
        self, task: TaskRecord, solution: str, reference_s: float | None
    ) -> Callable[[], tuple[Verdict, str | None]]:
        if task.family not in FAMILIES_SUPPORTED:
            raise ValueError(
                f"no verifier for family {task.family!r} (supported: "
                f"{', '.join(FAMILIES_SUPPORTED)})"
            )

        def body() -> tuple[Verdict, str | None]:
            try:
                verifier = self.cache.get(task.family)  # shared: nothing per caller stored on it
                verdict = verifier.verify_with_reference(task, solution, reference_s)
            except Exception as exc:  # a verifier bug is the environment's fault
                verdict = Verdict(
                    status="infra_error", detail=f"verifier raised {type(exc).__name__}: {exc}"
                )
            infra = (verdict.detail or "infra_error") if verdict.status == "infra_error" else None
            if infra is None:
                self.metrics.verdicts.labels(verdict.status).inc()
            return verdict, infra

        return body

    def trivial_body(self, task: TaskRecord) -> Callable[[], tuple[list[str], str | None]]:
        def body() -> tuple[list[str], str | None]:
            return self.cache.get(task.family).trivial_solutions(task), None

        return body

    def run_code_body(
        self, req: RunCodeRequest
    ) -> Callable[[], tuple[RunCodeResponse, str | None]]:
        def body() -> tuple[RunCodeResponse, str | None]:
            resp = run_code(self.sandbox, req)
            return resp, (
                resp.message or "sandbox error"
            ) if resp.status == "SandboxError" else None

        return body
