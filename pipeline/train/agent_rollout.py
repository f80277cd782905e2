"""TRL's ``rollout_func`` for ``train --agent``: one agent episode per GRPO completion.

``AgentRollout(prompts, trainer)`` is what ``GRPOTrainer(rollout_func=...)`` calls in place of
its own generation. ``prompts`` are the batch's dataset prompts, each repeated
``num_generations`` times by TRL's sampler; each entry becomes one episode of its task
(``transforms.agent.driver.run_episodes``: every episode in its own workspace with the hidden
tests taken out, the model batched across episodes each step by ``StreamPolicy``, the episode
judged by the repo verifier on its final workspace). It returns what TRL asks of a rollout
function: ``prompt_ids``, ``completion_ids`` (replies and observations interleaved),
``logprobs`` (None: TRL recomputes them), ``env_mask`` (1 on the model's tokens, 0 on the
observations', which TRL multiplies into the loss mask) and ``agent_reward``, which TRL
forwards to the reward function ``agent_reward``: ``transforms.agent.rows.episode_reward``,
the episode's verdict scored by the task's reward spec.

An episode that ends in an ``infra_error`` (no workspace, a verifier failure) says nothing
about the model: it fails the step loudly (``AgentInfraError``), as one-shot training does,
instead of being scored 0. Each episode is appended to ``episodes.jsonl`` with its steps and
its tokens, so what was trained on can be read back.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from tasksieve.pipeline.train.agent_policy import StreamPolicy
from tasksieve.schemas import TaskRecord
from tasksieve.transforms.agent.config import AgentConfig
from tasksieve.transforms.agent.driver import run_episodes
from tasksieve.transforms.agent.episode import Episode
from tasksieve.transforms.agent.rows import episode_reward, verdict_of
from tasksieve.transforms.agent.session import Opener, WorkspaceVerifier

EPISODES_FILE = "episodes.jsonl"


class AgentInfraError(RuntimeError):
    """An episode hit an infra error: the step cannot be scored."""


def user_message(task: TaskRecord) -> str:
    """The dataset prompt of ``task``: the user message its episode starts with."""
    return Episode(task, 0, AgentConfig()).messages[1]["content"]


def agent_reward(
    completions: Sequence[Any], agent_reward: Sequence[float], **_: Any
) -> list[float | None]:
    """TRL reward function: each episode's reward, as the rollout function computed it."""
    return [float(r) for r in agent_reward]  # never None: infra errors fail the step


class AgentRollout:
    """The rollout function (see the module docstring)."""

    def __init__(
        self,
        tasks: Sequence[TaskRecord],
        opener: Opener,
        verifier: WorkspaceVerifier,
        cfg: AgentConfig,
        policy: StreamPolicy,
        log_path: Path | None = None,
        reference_s: Mapping[str, float | None] | None = None,
    ) -> None:
        self.by_prompt = {user_message(t): t for t in tasks}
        if len(self.by_prompt) != len(tasks):
            raise ValueError("two training tasks share one prompt: an episode's task is ambiguous")
        self.opener, self.verifier, self.cfg, self.policy = opener, verifier, cfg, policy
        self.reference_s = dict(reference_s or {})
        self._log: TextIO | None = log_path.open("a", encoding="utf-8") if log_path else None
        self.calls = 0
        self.endings: Counter[str] = Counter()

    def _task(self, prompt: Any) -> TaskRecord:
        text = prompt if isinstance(prompt, str) else str(prompt[-1]["content"])
        try:
            return self.by_prompt[text]
        except KeyError:
            raise ValueError(f"rollout prompt is no training task's: {text[:80]!r}") from None

    def __call__(self, prompts: Sequence[Any], trainer: Any) -> dict[str, Any]:
        self.calls += 1
        tasks = [self._task(p) for p in prompts]
        seen: Counter[str] = Counter()
        jobs = []
        for task in tasks:  # the g-th copy of a prompt is its episode g
            jobs.append((task, seen[task.id]))
            seen[task.id] += 1
        model = trainer.accelerator.unwrap_model(trainer.model)
        self.policy.model = model
        self.policy.close()  # no stream left from a step that failed
        episodes = run_episodes(jobs, self.policy, self.opener, self.verifier, self.cfg)
        out: dict[str, list[Any]] = {"prompt_ids": [], "completion_ids": [], "env_mask": []}
        rewards: list[float] = []
        step = int(getattr(trainer.state, "global_step", 0))
        for e in episodes:
            value = episode_reward(e, self.reference_s.get(e.task.id))
            verdict = verdict_of(e)
            if value is None:
                raise AgentInfraError(
                    f"episode {e.index} of {e.task.id} ended {e.ending} with an infra error: "
                    f"{verdict.detail[:300]}"
                )
            stream = self.policy.take(e.task.id, e.index)
            if stream is None:  # ended before its first reply: prompt only
                stream = self.policy.prompt_stream(e.messages[:2])
            if not stream.completion_ids:  # TRL needs a token; it carries no loss
                stream.add([self.policy.eos], model=False)
            out["prompt_ids"].append(stream.prompt_ids)
            out["completion_ids"].append(stream.completion_ids)
            out["env_mask"].append(stream.env_mask)
            rewards.append(value)
            self.endings[str(e.ending)] += 1
            self._write(step, e, value, stream.prompt_ids, stream.completion_ids, stream.env_mask)
        return {**out, "logprobs": None, "agent_reward": rewards}

    def _write(
        self,
        step: int,
        e: Episode,
        value: float,
        prompt_ids: list[int],
        completion_ids: list[int],
        env_mask: list[int],
    ) -> None:
        if self._log is None:
            return
        v = verdict_of(e)
        row = {
            "train_step": step,
            "task_id": e.task.id,
            "episode": e.index,
            "ending": e.ending,
            "verdict": v.status,
            "reward": value,
            "steps": [
                {
                    "step": s.step,
                    "reply": s.reply,
                    "action": s.action.describe(),
                    "observation": s.observation,
                    "exit_code": s.exit_code,
                    "duration_s": s.duration_s,
                }
                for s in e.steps
            ],
            "prompt_tokens": len(prompt_ids),
            "model_tokens": sum(env_mask),
            "observation_tokens": len(env_mask) - sum(env_mask),
            "completion_ids": completion_ids,
            "env_mask": env_mask,
        }
        self._log.write(json.dumps(row) + "\n")
        self._log.flush()

    def close(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None
