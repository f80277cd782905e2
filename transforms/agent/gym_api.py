"""The Gym endpoints of the sandbox service: ``AgentEnv`` over HTTP, for other RL frameworks.

``tasksieve serve`` adds these routes through ``create_app``'s extensions (the service lives in
``verifiers`` and may not import ``transforms``). Every route needs the service's bearer token.

- ``POST /v1/envs`` ``{"task": <task record>, "tools": false, "max_steps": 30}`` opens an
  episode of a ``repo`` task (``AgentEnv.reset``) over the server's snapshot store
  (``--snapshot-store``): 201 ``{"env_id", "observation", "messages", "expires_in_s"}``.
  A record that is not a valid task is 422 naming each bad field (``task.verifier.snapshot:
  Field required``); a task of another family, a snapshot not in the store or a server with
  no store is 400 saying which; more envs than ``--max-envs-per-client`` for the caller
  (``X-Client-Id``, else its address) or ``--max-sessions`` in all is 429.
- ``POST /v1/envs/{id}/step`` ``{"action": "<reply text>" | {"name", "arguments", "id"}}``:
  ``{"observation", "reward", "done", "info"}`` (``info.verdict`` once done). A step while
  another step of that env runs, or after ``done``, is 409; an unknown, deleted or expired id
  is 404. A step runs to its end even when its caller disconnects (the env stays consistent;
  its next step sees what it did).
- ``DELETE /v1/envs/{id}`` ends the episode: its workspace is closed with every process in it.

An env idle for ``--session-ttl`` seconds or older than ``--max-session-lifetime`` is closed
by the service's reaper. Steps run on a thread pool of their own (``4 x --workers``), not in the
verify queue: an agent's think time between steps holds no worker.

What it does NOT guard against: a token holder that sends many ``X-Client-Id`` values gets
past the per-client cap (``--max-sessions`` still bounds the whole server), and any token holder
who learns an env id (unguessable, 24 random bytes) may step it.
"""

from __future__ import annotations

import asyncio
import secrets
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tasksieve.schemas import TaskRecord
from tasksieve.transforms.agent.config import AgentConfig
from tasksieve.transforms.agent.env import AgentEnv, EpisodeOver
from tasksieve.transforms.agent.session import Opener, SessionProblem
from tasksieve.verifiers.families.repo.snapshots import SnapshotStore
from tasksieve.verifiers.families.repo.verifier import RepoVerifier
from tasksieve.verifiers.service.core import Service

MAX_ERRORS = 5


class EnvCreate(BaseModel):
    """A new env: the task record and the episode's choices."""

    model_config = ConfigDict(extra="forbid")

    task: dict[str, Any]
    tools: bool = False
    max_steps: int = Field(default=30, ge=1, le=500)


class EnvStep(BaseModel):
    """One action: a reply in the text protocol, or one tool call."""

    model_config = ConfigDict(extra="forbid")

    action: str | dict[str, Any]


@dataclass
class Entry:
    """One env of the service, its owner and clocks; ``busy`` while a step runs."""

    id: str
    client: str
    env: AgentEnv
    started: float = field(default_factory=time.monotonic)
    last_used: float = field(default_factory=time.monotonic)
    busy: threading.Lock = field(default_factory=threading.Lock)
    done: bool = False


class EnvStore:
    """The service's envs: caps per client and in all, steps one at a time, reaping."""

    def __init__(self, service: Service) -> None:
        cfg = service.cfg
        self.service, self.ttl_s, self.lifetime_s = (
            service,
            cfg.session_ttl_s,
            cfg.max_session_lifetime_s,
        )
        self.per_client, self.most = cfg.max_envs_per_client, cfg.max_sessions
        self.cfg = AgentConfig(wall_s=min(900.0, self.lifetime_s))
        self.pool = ThreadPoolExecutor(max(4, 4 * cfg.workers), thread_name_prefix="gym")
        self._envs: dict[str, Entry] = {}
        self._pending: dict[str, int] = {}
        self._lock = threading.Lock()
        self._verifier: RepoVerifier | None = None
        self._opener: Opener | None = None
        self.store = SnapshotStore(cfg.snapshot_store) if cfg.snapshot_store else None

    def __len__(self) -> int:
        return len(self._envs)

    def _held(self, client: str) -> int:
        return sum(e.client == client for e in self._envs.values()) + self._pending.get(client, 0)

    def claim(self, client: str) -> None:
        """Reserve a slot for ``client``'s new env, or 429."""
        with self._lock:
            if self._held(client) >= self.per_client:
                raise HTTPException(429, f"client {client!r} holds {self.per_client} envs (max)")
            if len(self._envs) + sum(self._pending.values()) >= self.most:
                raise HTTPException(429, f"the server holds {self.most} envs (max)")
            self._pending[client] = self._pending.get(client, 0) + 1

    def release(self, client: str) -> None:
        with self._lock:
            self._pending[client] -= 1
            if not self._pending[client]:
                del self._pending[client]

    def open(self, client: str, task: TaskRecord, req: EnvCreate) -> tuple[Entry, str]:
        """A new env of ``task`` and its first observation (runs on the pool)."""
        if self.store is None:
            raise HTTPException(400, "this server has no snapshot store (--snapshot-store DIR)")
        sandbox = self.service.sandbox
        with self._lock:
            if self._verifier is None:
                self._verifier = RepoVerifier(sandbox, self.store)
                self._opener = Opener(sandbox, self.store, self.cfg)
            verifier, opener = self._verifier, self._opener
        cfg = replace(self.cfg, tools=req.tools, max_steps=req.max_steps)
        env = AgentEnv(sandbox, verifier, cfg, opener=opener)
        try:
            observation = env.reset(task)
        except (SessionProblem, EpisodeOver) as exc:
            raise HTTPException(400, str(exc)) from exc
        entry = Entry(secrets.token_urlsafe(24), client, env)
        with self._lock:
            self._envs[entry.id] = entry
        return entry, observation

    def get(self, env_id: str) -> Entry:
        with self._lock:
            entry = self._envs.get(env_id)
        if entry is None or self._expired(entry, time.monotonic()):
            raise HTTPException(404, f"no env {env_id!r} (never created, deleted or expired)")
        return entry

    def _expired(self, entry: Entry, now: float) -> bool:
        if now - entry.started >= self.lifetime_s:
            return True
        return not entry.busy.locked() and now - entry.last_used >= self.ttl_s

    def step(self, entry: Entry, action: str | dict[str, Any]) -> dict[str, Any]:
        """One step; the caller holds ``entry.busy``, released here whatever happens."""
        try:
            if entry.done:
                raise EpisodeOver(f"env {entry.id}: the episode is over; DELETE it or open another")
            observation, reward, done, info = entry.env.step(action)
            entry.done = done
            if done and info.get("verdict") is not None:
                info["verdict"] = info["verdict"].model_dump(mode="json")
            return {"observation": observation, "reward": reward, "done": done, "info": info}
        finally:
            entry.last_used = time.monotonic()
            entry.busy.release()

    def delete(self, env_id: str) -> bool:
        with self._lock:
            entry = self._envs.pop(env_id, None)
        if entry is None:
            return False
        entry.env.close()  # a step in flight sees its session end
        return True

    def reap(self) -> list[str]:
        now = time.monotonic()
        with self._lock:
            due = [e.id for e in self._envs.values() if self._expired(e, now)]
        return [i for i in due if self.delete(i)]

    def close(self) -> None:
        for env_id in list(self._envs):
            self.delete(env_id)
        self.pool.shutdown(wait=False, cancel_futures=True)
        if self._verifier is not None:
            self._verifier.close()


def task_of(raw: dict[str, Any]) -> TaskRecord:
    """The task record, or 422 naming each bad field (``task.<path>: <why>``)."""
    try:
        return TaskRecord.model_validate(raw)
    except ValidationError as exc:
        where = [
            f"task.{'.'.join(str(p) for p in e['loc'])}: {e['msg']}"
            for e in exc.errors()[:MAX_ERRORS]
        ]
        more = len(exc.errors()) - MAX_ERRORS
        raise HTTPException(
            422,
            "not a valid task record: "
            + "; ".join(where)
            + (f" (+{more} more)" if more > 0 else ""),
        ) from None


def add_gym_routes(app: FastAPI, service: Service, meta: Callable[..., Any]) -> None:
    """Register ``/v1/envs`` on ``app`` (an ``Extension`` of ``create_app``)."""
    del meta  # steps do not go through the verify queue (see the module docstring)
    envs = EnvStore(service)
    service.reapers.append(envs.reap)
    service.closers.append(envs.close)

    async def on_pool(fn: Callable[[], Any]) -> Any:
        # shielded: a caller that goes away leaves the call to finish (and release what it holds)
        loop = asyncio.get_running_loop()
        return await asyncio.shield(loop.run_in_executor(envs.pool, fn))

    def client_of(request: Request) -> str:
        return request.headers.get("x-client-id") or (
            request.client.host if request.client else "unknown"
        )

    @app.post("/v1/envs", status_code=201)
    async def create(req: EnvCreate, request: Request) -> dict[str, Any]:
        task = task_of(req.task)
        client = client_of(request)
        envs.claim(client)
        try:
            entry, observation = await on_pool(lambda: envs.open(client, task, req))
        finally:
            envs.release(client)
        return {
            "env_id": entry.id,
            "observation": observation,
            "messages": entry.env.messages,
            "expires_in_s": envs.ttl_s,
        }

    @app.post("/v1/envs/{env_id}/step")
    async def step(env_id: str, req: EnvStep) -> dict[str, Any]:
        entry = envs.get(env_id)
        if not entry.busy.acquire(blocking=False):
            raise HTTPException(409, f"env {env_id}: another step is in progress")
        try:
            result: dict[str, Any] = await on_pool(lambda: envs.step(entry, req.action))
        except EpisodeOver as exc:
            raise HTTPException(409, str(exc)) from exc
        return result

    @app.delete("/v1/envs/{env_id}")
    async def delete(env_id: str) -> dict[str, Any]:
        if not await asyncio.to_thread(envs.delete, env_id):
            raise HTTPException(404, f"no env {env_id!r}")
        return {"env_id": env_id, "deleted": True}
