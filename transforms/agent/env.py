"""A Gym-style environment over agent episodes, in-process, for other RL frameworks.

``AgentEnv(sandbox, verifier, cfg)``; ``reset(task) -> observation`` opens a workspace (the
hidden tests taken out, as in ``curate --agent``) and returns the task's messages as text;
``step(action) -> (observation, reward, done, info)`` takes one reply in the text protocol
(a fenced ``bash`` block) or, with ``cfg.tools``, one tool call as a dict
(``{"name": ..., "arguments": "<json>"}``). The episode ends exactly as in the pipeline
(``transforms.agent.episode``): on submit the repo verifier judges the final workspace and
``reward`` is that verdict scored by the task's reward spec (0.0 for a budget ending; None for
an ``infra_error``, which says nothing about the agent); every other step's reward is 0.0.
``info`` holds the step's exit code and CPU seconds, whether the observation was cut, the
episode's ending and verdict once done, and its token count. ``close`` releases the session;
``reset`` closes the previous one first.

The same environment is served over HTTP by ``tasksieve serve`` (``/v1/envs``, see
``transforms.agent.gym_api``) and driven from another process by
``transforms.agent.remote_env.RemoteAgentEnv``, which has this class's signature.

What it does NOT offer: vectorised environments (run several ``AgentEnv``s, or use
``transforms.agent.driver.run_episodes`` which batches the model across episodes).
"""

from __future__ import annotations

from typing import Any

from tasksieve.schemas import TaskRecord
from tasksieve.transforms.agent.config import AgentConfig
from tasksieve.transforms.agent.episode import Episode
from tasksieve.transforms.agent.policies import Reply, ToolCall
from tasksieve.transforms.agent.rows import episode_reward
from tasksieve.transforms.agent.session import Opener, WorkspaceVerifier
from tasksieve.verifiers.sandbox.base import Sandbox

Action = str | dict[str, Any]


class EpisodeOver(RuntimeError):
    """``step`` was called with no open episode (before ``reset`` or after ``done``)."""


class AgentEnv:
    """One episode at a time over live workspaces (see the module docstring)."""

    def __init__(
        self,
        sandbox: Sandbox,
        verifier: WorkspaceVerifier,
        cfg: AgentConfig,
        opener: Opener | None = None,
    ) -> None:
        """``opener`` shares one ``Opener`` (its environments, built once) between envs."""
        self.verifier, self.cfg = verifier, cfg
        self.opener = opener or Opener(sandbox, verifier.store, cfg)
        self.episode: Episode | None = None
        self._count = 0

    def reset(self, task: TaskRecord) -> str:
        """Open a fresh episode of ``task``; the observation is its system and user messages."""
        self.close()
        self.episode = Episode(task, self._count, self.cfg, tools=self.cfg.tools)
        self._count += 1
        self.episode.start(self.opener)
        if self.episode.done:  # no workspace: the verdict says why
            verdict = self.episode.verdict
            raise EpisodeOver(verdict.detail if verdict else "the episode could not start")
        return "\n\n".join(str(m["content"]) for m in self.episode.messages)

    def step(self, action: Action) -> tuple[str, float | None, bool, dict[str, Any]]:
        """Run one action; see the module docstring for what comes back."""
        e = self.episode
        if e is None or e.done:
            raise EpisodeOver("no open episode: call reset(task) first")
        e.apply(_reply(action), self.verifier)
        last = e.steps[-1] if e.steps else None
        info: dict[str, Any] = {
            "step": len(e.steps),
            "exit_code": last.exit_code if last else None,
            "cpu_s": last.cpu_s if last else None,
            "truncated": last.truncated if last else False,
            "tokens": e.tokens,
        }
        observation = last.observation if last else ""
        if not e.done:
            return observation, 0.0, False, info
        info.update(ending=e.ending, verdict=e.verdict, diff=e.diff)
        return observation, episode_reward(e), True, info

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The conversation so far (what a chat model would be sent next)."""
        return list(self.episode.messages) if self.episode else []

    def close(self) -> None:
        """Release the current episode's session (its verdict, if any, stays readable)."""
        if self.episode is not None and self.episode.ws is not None:
            self.episode.ws.close()
            self.episode.ws = None
            if not self.episode.done:
                self.episode.ending = "closed"


def _reply(action: Action) -> Reply:
    if isinstance(action, str):
        return Reply(text=action)
    name, arguments = str(action.get("name", "")), str(action.get("arguments", "{}"))
    call_id = str(action.get("id", "call"))
    return Reply(tool_calls=(ToolCall(call_id, name, arguments),))
