"""``RemoteAgentEnv``: the Gym-style environment of a ``tasksieve serve`` over HTTP.

Same signature as ``transforms.agent.env.AgentEnv``: ``reset(task) -> observation``,
``step(action) -> (observation, reward, done, info)``, ``close()``, ``messages``; so a
framework that drives ``AgentEnv`` in-process (verl, SkyRL, rllm...) drives a remote one the
same way, with no tasksieve pipeline and no sandbox on its own host. ``info["verdict"]`` is a
``Verdict`` again once the episode is done. A step after ``done`` (or before ``reset``) raises
``EpisodeOver``; every other refusal raises ``RemoteEnvError`` with the server's status and
its message (which field of the task was wrong, which cap was hit).

Nothing is retried: a step is not idempotent (the command may have run). A step whose answer
was lost (a timeout, a dropped connection) leaves the env as the step left it; the next
``step`` says so with a 409 while it still runs.
"""

from __future__ import annotations

from typing import Any

import httpx

from tasksieve.schemas import TaskRecord, Verdict
from tasksieve.transforms.agent.env import Action, EpisodeOver


class RemoteEnvError(RuntimeError):
    """The service refused a request; ``status`` is its HTTP status."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(f"HTTP {status}: {detail}")
        self.status, self.detail = status, detail


class RemoteAgentEnv:
    """One episode at a time on a ``tasksieve serve`` (see the module docstring)."""

    def __init__(
        self,
        url: str,
        token: str | None = None,
        *,
        tools: bool = False,
        max_steps: int = 30,
        client_id: str | None = None,
        timeout_s: float = 600.0,
    ) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        if client_id:
            headers["X-Client-Id"] = client_id
        self.http = httpx.Client(base_url=url.rstrip("/"), headers=headers, timeout=timeout_s)
        self.tools, self.max_steps = tools, max_steps
        self.env_id: str | None = None
        self.done = False
        self._messages: list[dict[str, Any]] = []

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        resp = self.http.request(method, path, json=body)
        if resp.status_code >= 400:
            try:
                detail = str(resp.json().get("detail"))
            except ValueError:
                detail = resp.text[:500]
            if resp.status_code == 409 and "over" in detail:
                raise EpisodeOver(detail)
            raise RemoteEnvError(resp.status_code, detail)
        return resp.json()

    def reset(self, task: TaskRecord | dict[str, Any]) -> str:
        """Open a fresh episode of ``task`` (closing the last one); its first observation."""
        self.close()
        raw = task.model_dump(mode="json") if isinstance(task, TaskRecord) else task
        body = {"task": raw, "tools": self.tools, "max_steps": self.max_steps}
        got = self._call("POST", "/v1/envs", body)
        self.env_id, self.done = str(got["env_id"]), False
        self._messages = list(got.get("messages") or [])
        return str(got["observation"])

    def step(self, action: Action) -> tuple[str, float | None, bool, dict[str, Any]]:
        """Run one action on the server; see ``AgentEnv.step``."""
        if self.env_id is None or self.done:
            raise EpisodeOver("no open episode: call reset(task) first")
        got = self._call("POST", f"/v1/envs/{self.env_id}/step", {"action": action})
        info = dict(got["info"])
        if info.get("verdict") is not None:
            info["verdict"] = Verdict.model_validate(info["verdict"])
        self.done = bool(got["done"])
        reward = got["reward"]
        return str(got["observation"]), None if reward is None else float(reward), self.done, info

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The conversation as the server opened it (the first messages)."""
        return list(self._messages)

    def close(self) -> None:
        """End the current episode on the server (its workspace and processes go)."""
        if self.env_id is not None:
            env_id, self.env_id = self.env_id, None
            try:
                self._call("DELETE", f"/v1/envs/{env_id}")
            except RemoteEnvError as exc:
                if exc.status != 404:  # gone already (expired): nothing left to end
                    raise

    def __enter__(self) -> RemoteAgentEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
        self.http.close()
