"""What acts in an episode: a ``Policy`` answers the next turn of many episodes at once.

``act`` takes one ``Turn`` per open episode and returns one ``Reply`` each, so a model is
called once per step for every episode of a worker's batch (the same batching as the one-shot
path). ``SamplerPolicy`` puts any sampler behind the text protocol: transformers, openai, vllm
and replay (a replay file of recorded actions: a row's ``turn`` is the step, its ``episode``
the episode index, as for multi-turn runs; ``transforms.samplers.replay``).
``OpenAIToolPolicy`` (``transforms.agent.tool_policy``) uses OpenAI tool calling;
``transforms.agent.scripted`` holds scripted agents.

A policy that fails on a turn returns ``Reply(error=...)``; the episode ends as
``policy_error`` and the stage rejects the task as ``rollouts.sampler_error``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from tasksieve.schemas import TaskRecord
from tasksieve.transforms.agent.protocol import SYSTEM_PROMPT
from tasksieve.transforms.samplers import SamplerConfig, SampleRequest, make_model_handler

Message = dict[str, Any]
"""One chat message in OpenAI's shape (``role``, ``content``, ``tool_calls``, ...)."""


@dataclass(frozen=True)
class Turn:
    """What a policy sees for one episode's next step: the whole conversation so far."""

    task: TaskRecord
    episode: int
    step: int
    messages: tuple[Message, ...]


@dataclass(frozen=True)
class ToolCall:
    """One OpenAI tool call of a reply."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class Reply:
    """A policy's answer for one episode: text, tool calls, token counts, or an error."""

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tokens_in: int | None = None
    tokens_out: int | None = None
    error: str | None = None


class Policy(Protocol):
    """Answers turns of many episodes at once (see the module docstring)."""

    tools: bool
    model_id: str
    name: str

    def act(self, turns: Sequence[Turn]) -> list[Reply]: ...

    def close(self) -> None: ...


def sample_request(turn: Turn) -> SampleRequest:
    """The sampler request of a text-protocol turn: the agent's system prompt, the task's
    prompt, then the steps so far as (role, content) pairs."""
    history = tuple((m["role"], str(m.get("content") or "")) for m in turn.messages[2:])
    return SampleRequest(
        task_id=turn.task.id,
        family=turn.task.family,
        prompt=str(turn.messages[1]["content"]),
        history=history,
        turn=turn.step,
        episode=turn.episode,
        system=SYSTEM_PROMPT,
    )


@dataclass
class SamplerPolicy:
    """Any sampler (``SamplerConfig``) behind the text protocol, one completion per turn."""

    cfg: SamplerConfig
    tools: bool = False
    name: str = ""
    model_id: str = ""
    _handler: Any = field(default=None, repr=False)
    _model: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        from tasksieve.transforms.samplers import model_id

        self.cfg = dataclasses.replace(self.cfg, samples=1, first_sample=0)
        self.name, self.model_id = self.cfg.backend, model_id(self.cfg)

    def _load(self) -> None:
        if self._handler is None:
            self._handler = make_model_handler(self.cfg)
            self._model = self._handler.load_model()

    def act(self, turns: Sequence[Turn]) -> list[Reply]:
        """One reply per turn; the sampler's batches are at most its ``max_batch_size``."""
        self._load()
        size = int(self._handler.batch_elements_kwargs().get("max_batch_size", len(turns)) or 1)
        replies: list[Reply] = []
        for start in range(0, len(turns), max(1, size)):
            chunk = [sample_request(t) for t in turns[start : start + size]]
            try:
                out = list(self._handler.run_inference(chunk, self._model))
            except Exception as exc:  # a sampler that raises fails these turns, not the run
                replies += [Reply(error=f"{type(exc).__name__}: {exc}") for _ in chunk]
                continue
            for samples in out:
                if samples.error is not None:
                    replies.append(Reply(error=samples.error))
                elif not samples.completions:
                    replies.append(Reply(error=f"{samples.sampler}: no completion returned"))
                else:
                    cols = samples.columns(0)
                    replies.append(
                        Reply(
                            text=samples.completions[0],
                            tokens_in=cols.get("prompt_tokens"),
                            tokens_out=cols.get("completion_tokens"),
                        )
                    )
        return replies

    def close(self) -> None:
        self._handler = self._model = None
