"""The ``/sessions`` routes: create, inspect, exec, put/get/list files, delete.

The store behind them is a live one (``live``: a workspace with a persistent shell) where the
sandbox opens workspaces, else the packed one (``sessions``); the routes and their bodies are
the same for both, and ``GET /sessions/{id}`` says which (``live``).

Execs go through the scheduler like any other sandbox work (priority, deadline,
idempotency); creating, reading and deleting are cheap and answered at once. A session is
held in use from the moment a call on it arrives until its answer is ready, so an exec that
waits or runs longer than the TTL does not lose its session. A file upload is read as it
streams in and refused with 413 as soon as it would take the session past its size limit (a
file it replaces does not count).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Protocol

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import Response

from tasksieve.verifiers.sandbox.base import Limits
from tasksieve.verifiers.service.core import Meta, Service
from tasksieve.verifiers.service.live import LiveSession
from tasksieve.verifiers.service.models import SessionCreate, SessionExec
from tasksieve.verifiers.service.sessions import Command, ExecResult, Session, SessionError

PYTHON_NAMES = ("python", "python3")


class Store(Protocol):
    """What the routes need of a session store (``SessionStore`` or ``LiveSessionStore``)."""

    live: bool
    max_bytes: int

    def create(self, limits: Limits, ttl_s: float, lifetime_s: float | None = None) -> Any: ...
    def use(self, sid: str) -> AbstractContextManager[Any]: ...
    def delete(self, sid: str) -> bool: ...
    def list_files(self, session: Any) -> dict[str, int]: ...
    def room_for(self, session: Any, name: str) -> int: ...
    def put_file(self, session: Any, name: str, data: bytes) -> None: ...
    def get_file(self, session: Any, name: str) -> bytes: ...
    def exec(
        self, session: Any, command: Command, stdin: bytes, timeout_s: float
    ) -> ExecResult: ...


def _info(session: Session | LiveSession) -> dict[str, Any]:
    return {
        "session_id": session.id,
        "live": isinstance(session, LiveSession),
        "expires_in_s": round(session.expires_in, 3),
        "limits": {
            "memory_mb": session.limits.memory_mb,
            "cpu_s": session.limits.cpu_s,
            "max_processes": session.limits.max_processes,
        },
    }


def _exec_answer(res: ExecResult) -> dict[str, Any]:
    ex = res.execution
    return {
        "exit_code": res.exit_code,
        "timed_out": res.timed_out,
        "stdout": ex.stdout.decode("utf-8", "replace"),
        "stderr": ex.stderr.decode("utf-8", "replace"),
        "duration_s": round(ex.duration_s, 6),
        "cpu_s": ex.cpu_s,
        "limit_hit": ex.limit_hit,
        "infra_error": ex.infra_error,
        "files": res.files,
        "dropped": res.dropped,
        "files_kept": res.files_kept,
    }


def command_of(req: SessionExec, python: str) -> Command:
    """The command to run: ``command`` (python/python3 mean the sandbox's interpreter) or
    the snippet through ``python -c``; a bash snippet runs in a live session's shell itself
    (``bash -c`` in a packed one)."""
    if (req.command is None) == (req.code is None):
        raise HTTPException(400, "give exactly one of command (argv list) or code (a snippet)")
    files = req.list_files
    if req.command is not None:
        head = python if req.command[0] in PYTHON_NAMES else req.command[0]
        return Command([head, *req.command[1:]], files=files)
    assert req.code is not None
    if req.language == "python":
        return Command([python, "-c", req.code], files=files)
    return Command(["/bin/bash", "-c", req.code], shell=req.code, files=files)


def add_routes(
    app: FastAPI,
    service: Service,
    meta: Callable[..., Any],
    memory_ok: Callable[[int, str], None],
) -> None:
    """Register the session routes on ``app`` (``memory_ok`` raises 422 for memory over the
    server's bound; the token was checked before the request got here)."""
    store: Store = service.sessions
    cfg = service.cfg

    @app.post("/sessions", status_code=201)
    async def create(req: SessionCreate) -> dict[str, Any]:
        memory_ok(req.memory_mb, "memory_mb")
        ttl = min(req.ttl_s or cfg.session_ttl_s, cfg.max_session_ttl_s)
        limits = Limits(
            wall_s=req.cpu_s,
            cpu_s=req.cpu_s,
            memory_mb=req.memory_mb,
            max_processes=req.max_processes,
        )
        if store.live:  # opening a workspace takes a while: not on the event loop
            made = await asyncio.to_thread(store.create, limits, ttl, req.lifetime_s)
        else:
            made = store.create(limits, ttl)
        return _info(made)

    @app.get("/sessions/{sid}")
    async def info(sid: str) -> dict[str, Any]:
        with store.use(sid) as session:
            files = await asyncio.to_thread(store.list_files, session)
            return {**_info(session), "files": files}

    @app.delete("/sessions/{sid}")
    async def delete(sid: str) -> dict[str, Any]:
        if not await asyncio.to_thread(store.delete, sid):
            raise HTTPException(404, f"no session {sid!r}")
        return {"session_id": sid, "deleted": True}

    @app.post("/sessions/{sid}/exec")
    async def exec_(sid: str, req: SessionExec, request: Request) -> dict[str, Any]:
        with store.use(sid) as session:
            return await _exec(session, req, request)

    async def _exec(
        session: Session | LiveSession, req: SessionExec, request: Request
    ) -> dict[str, Any]:
        m: Meta = await meta(
            request,
            request.headers.get("x-priority"),
            request.headers.get("x-deadline-s"),
            request.headers.get("x-client-id"),
            request.headers.get("idempotency-key"),
        )
        command = command_of(req, service.sandbox.python)

        def body() -> tuple[ExecResult, str | None]:
            res = store.exec(session, command, req.stdin.encode(), req.timeout_s)
            return res, res.execution.infra_error

        return _exec_answer(await service.submit(m, "session_exec", body))

    @app.get("/sessions/{sid}/files")
    async def list_files(sid: str) -> dict[str, Any]:
        with store.use(sid) as session:
            return {"files": await asyncio.to_thread(store.list_files, session)}

    @app.put("/sessions/{sid}/files/{name:path}")
    async def put_file(sid: str, name: str, request: Request) -> dict[str, Any]:
        with store.use(sid) as session:
            room = await asyncio.to_thread(store.room_for, session, name)
            data = await _read_at_most(request, room, store.max_bytes)
            await asyncio.to_thread(store.put_file, session, name, data)
            return {"name": name, "bytes": len(data)}

    @app.get("/sessions/{sid}/files/{name:path}")
    async def get_file(sid: str, name: str) -> Response:
        with store.use(sid) as session:
            data = await asyncio.to_thread(store.get_file, session, name)
            return Response(data, media_type="application/octet-stream")


async def _read_at_most(request: Request, room: int, max_bytes: int) -> bytes:
    """The request body, read as it streams in; 413 as soon as it passes ``room`` bytes."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > room:
            raise SessionError(f"session files would exceed {max_bytes} bytes", 413)
        chunks.append(chunk)
    return b"".join(chunks)
