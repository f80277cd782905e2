"""The ASGI application: routes, bearer-token auth, and errors as JSON with clear codes.

Scheduling facts travel in headers on every work endpoint: ``X-Priority`` (training,
interactive, curation, batch, or a number; lower runs first; default curation),
``X-Deadline-S`` (seconds from arrival by which the job must have started),
``X-Client-Id`` (fairness unit; default the peer address) and ``Idempotency-Key``.
``/healthz`` and ``/metrics`` need no token (probes and scrapers); everything else does, and
the token and the body size are checked from the headers before any body is read
(``tasksieve.verifiers.service.guard``). Requests for more memory than ``max_memory_mb`` or a
reference runtime over ``max_reference_s`` are answered 422. A verify request's
``reference_s`` applies to that request only: nothing one caller sends changes the limits
another caller's solutions run under.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import importlib.metadata
import logging
import math
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from fastapi import Depends, FastAPI, Header, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import ValidationError

from tasksieve.schemas import TaskRecord
from tasksieve.verifiers.sandbox.base import Sandbox
from tasksieve.verifiers.service import sessions_api
from tasksieve.verifiers.service.config import ServiceConfig
from tasksieve.verifiers.service.core import Meta, Service
from tasksieve.verifiers.service.guard import Guard
from tasksieve.verifiers.service.idempotency import KeyConflict
from tasksieve.verifiers.service.models import TrivialRequest, VerifyRequest
from tasksieve.verifiers.service.runcode import BadRequest, RunCodeRequest, plan
from tasksieve.verifiers.service.scheduler import DeadlineExceeded, QueueFull
from tasksieve.verifiers.service.sessions import SessionError

log = logging.getLogger(__name__)


def _version() -> str:
    try:
        return importlib.metadata.version("tasksieve")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


VERSION = _version()  # in /healthz: clients key cached verdicts on it


def error(status: int, code: str, detail: str, headers: dict[str, str] | None = None) -> Response:
    return JSONResponse({"error": code, "detail": detail}, status_code=status, headers=headers)


Extension = Callable[[FastAPI, Service, Callable[..., Any]], None]
"""Adds routes to the app: given the app, the service and the scheduling-facts dependency
(``meta``). The Gym endpoints (``transforms.agent.gym_api``) come in this way, since this
package may not import ``transforms``."""


def create_app(
    cfg: ServiceConfig, sandbox: Sandbox | None = None, extensions: Sequence[Extension] = ()
) -> FastAPI:
    """The application for ``cfg``; ``sandbox`` overrides the one ``cfg.backend`` names;
    each of ``extensions`` adds its routes."""
    service = Service(cfg, sandbox)

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        reaper = asyncio.create_task(_reap(service))
        try:
            yield
        finally:
            reaper.cancel()
            await asyncio.to_thread(service.close)

    app = FastAPI(title="tasksieve sandbox service", lifespan=lifespan)
    app.state.service = service
    app.add_middleware(Guard, token=cfg.token, limit=cfg.body_limit)  # before any body is read

    def memory_ok(memory_mb: int, what: str) -> None:
        if memory_mb > cfg.max_memory_mb:
            raise HTTPException(
                422, f"{what} asks for {memory_mb} MB; this server allows {cfg.max_memory_mb} MB"
            )

    async def meta(
        request: Request,
        x_priority: str | None = Header(default=None),
        x_deadline_s: str | None = Header(default=None),
        x_client_id: str | None = Header(default=None),
        idempotency_key: str | None = Header(default=None),
    ) -> Meta:
        body = await request.body()
        fingerprint = hashlib.sha256(request.url.path.encode() + b"\0" + body).hexdigest()
        client = x_client_id or (request.client.host if request.client else "unknown")
        try:
            return service.meta(client, x_priority, x_deadline_s, idempotency_key, fingerprint)
        except ValueError as exc:
            raise HTTPException(400, str(exc)) from exc

    @app.exception_handler(RequestValidationError)
    async def _invalid(_r: Request, exc: RequestValidationError) -> Response:
        # FastAPI's own answer echoes the input, which may not even be JSON (Infinity, NaN)
        where = [
            {"loc": list(e.get("loc", ())), "msg": str(e.get("msg", ""))} for e in exc.errors()
        ]
        return JSONResponse({"error": "unprocessable", "detail": where}, status_code=422)

    @app.exception_handler(QueueFull)
    async def _full(_r: Request, exc: QueueFull) -> Response:
        retry = str(math.ceil(exc.retry_after_s))
        return error(429, "queue_full", str(exc), {"Retry-After": retry})

    @app.exception_handler(DeadlineExceeded)
    async def _late(_r: Request, exc: DeadlineExceeded) -> Response:
        return error(504, "deadline_exceeded", f"dropped before running: {exc}")

    @app.exception_handler(KeyConflict)
    async def _conflict(_r: Request, exc: KeyConflict) -> Response:
        return error(409, "idempotency_key_conflict", str(exc))

    @app.exception_handler(SessionError)
    async def _session(_r: Request, exc: SessionError) -> Response:
        return error(exc.status, "session", str(exc))

    @app.exception_handler(HTTPException)
    async def _http(_r: Request, exc: HTTPException) -> Response:
        code = {
            401: "unauthorized",
            400: "bad_request",
            404: "not_found",
            413: "too_large",
            422: "unprocessable",
        }.get(exc.status_code)
        return error(exc.status_code, code or "error", str(exc.detail), dict(exc.headers or {}))

    @app.get("/healthz")
    async def healthz() -> Response:
        body = {
            "status": "closing" if service.closing else "ok",
            "backend": service.sandbox.name,
            "version": VERSION,
            "workers": cfg.workers,
            "queue_depth": service.scheduler.depth,
            "in_flight": service.scheduler.in_flight,
            "sessions": len(service.sessions),
            "session_mode": "live" if service.sessions.live else "packed",
        }
        return JSONResponse(body, status_code=503 if service.closing else 200)

    @app.get("/metrics")
    async def metrics() -> Response:
        return Response(generate_latest(service.metrics.registry), media_type=CONTENT_TYPE_LATEST)

    @app.post("/verify")
    async def verify(req: VerifyRequest, m: Meta = Depends(meta)) -> Response:
        try:
            raw = req.task_record()
        except ValueError as exc:
            raise HTTPException(400, str(exc)) from exc
        task = _task(raw)
        if req.reference_s is not None and req.reference_s > cfg.max_reference_s:
            raise HTTPException(
                422, f"reference_s {req.reference_s} is over this server's {cfg.max_reference_s}"
            )
        memory_ok(getattr(task.verifier, "memory_mb", 0), "the task's verifier spec")
        try:
            body = service.verify_body(task, req.solution, req.reference_s)
        except ValueError as exc:
            raise HTTPException(400, str(exc)) from exc
        verdict = await service.submit(m, "verify", body)
        return JSONResponse({"task_id": task.id, **verdict.model_dump()})  # no re-encoding

    @app.post("/trivial_solutions")
    async def trivial(req: TrivialRequest, m: Meta = Depends(meta)) -> Response:
        task = _task(req.task)
        memory_ok(getattr(task.verifier, "memory_mb", 0), "the task's verifier spec")
        solutions = await service.submit(m, "trivial", service.trivial_body(task))
        return JSONResponse({"task_id": task.id, "solutions": solutions})

    @app.post("/run_code")
    async def run_code(req: RunCodeRequest, m: Meta = Depends(meta)) -> Response:
        memory_ok(req.memory_limit_MB, "memory_limit_MB")
        try:
            plan(req, service.sandbox.python)  # refuse bad requests before queueing
        except (BadRequest, ValueError) as exc:
            raise HTTPException(400, str(exc)) from exc
        resp = await service.submit(m, "run_code", service.run_code_body(req))
        return Response(resp.model_dump_json(), media_type="application/json")

    sessions_api.add_routes(app, service, meta, memory_ok)  # the Guard authorizes them
    for extend in extensions:
        extend(app, service, meta)
    return app


def _task(raw: dict[str, Any]) -> TaskRecord:
    try:
        return TaskRecord.model_validate(raw)
    except ValidationError as exc:
        raise HTTPException(400, f"not a valid task record: {exc}") from exc


async def _reap(service: Service) -> None:
    """End expired sessions every ``reap_interval_s``."""
    while True:
        await asyncio.sleep(service.cfg.reap_interval_s)
        try:
            for reap in service.reapers:
                await asyncio.to_thread(reap)
        except OSError as exc:  # a directory that will not go away must not stop the reaper
            log.warning("session reaper: %s", exc)
