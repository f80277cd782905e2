"""OpenAI tool calling as a policy: the agent's tools sent with every request.

One chat completion per open episode and step, all of a step's requests in flight together on
the openai sampler's request threads (``SamplerConfig.max_concurrency``), each with the
project's HTTP retries (``verifiers.http_retry``, as the openai sampler). The reply's tool calls
become the episode's action (``transforms.agent.protocol.parse_tool_call``); its text, if any,
is kept in the conversation. Usage numbers from the server are the step's tokens.

What it does NOT do: check that the server really supports tools (a server that ignores them
answers in prose, which is a protocol error each step, so the episode ends on that budget), or
stream.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tasksieve.transforms.agent.policies import Reply, ToolCall, Turn
from tasksieve.transforms.agent.protocol import TOOLS
from tasksieve.transforms.samplers import SamplerConfig
from tasksieve.transforms.samplers.openai_sampler import Connection, OpenAIModelHandler, to_failure
from tasksieve.verifiers.http_retry import Failure, RetriesExhausted, call_with_retries


def request_kwargs(cfg: SamplerConfig, turn: Turn) -> dict[str, Any]:
    """Keyword arguments of ``chat.completions.create`` for one step of one episode."""
    kwargs: dict[str, Any] = {
        "model": cfg.model,
        "messages": list(turn.messages),
        "tools": TOOLS,
        "tool_choice": "auto",
        "temperature": cfg.temperature,
        "top_p": cfg.top_p,
        "max_tokens": cfg.max_new_tokens,
        "seed": cfg.seed + 1000 * turn.episode + turn.step,
    }
    extra = cfg.extra_body_dict()
    if extra:
        kwargs["extra_body"] = extra
    return kwargs


def to_reply(response: Any) -> Reply:
    """The first choice of a chat completion as a ``Reply``."""
    message = response.choices[0].message
    calls = tuple(
        ToolCall(str(c.id), str(c.function.name), str(c.function.arguments or ""))
        for c in (message.tool_calls or [])
    )
    usage = response.usage
    return Reply(
        text=message.content or "",
        tool_calls=calls,
        tokens_in=usage.prompt_tokens if usage else None,
        tokens_out=usage.completion_tokens if usage else None,
    )


@dataclass
class OpenAIToolPolicy:
    """Episodes driven by an OpenAI-compatible server with tool calling."""

    cfg: SamplerConfig
    tools: bool = True
    name: str = "openai-tools"
    model_id: str = ""
    _conn: Connection | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.cfg.backend != "openai":
            raise ValueError(f"tool calling needs --sampler openai, not {self.cfg.backend!r}")
        self.cfg = dataclasses.replace(self.cfg, samples=1)
        self.model_id = self.cfg.model or ""

    def _one(self, conn: Connection, turn: Turn) -> Reply:
        kwargs = request_kwargs(self.cfg, turn)

        def attempt() -> Any:
            try:
                response = conn.client.chat.completions.create(**kwargs)
            except Exception as exc:
                failure = to_failure(exc, self.cfg.request_timeout_s)
                if failure is None:
                    raise
                raise failure from exc
            if not response.choices:
                raise Failure("the server returned no choices", retryable=False)
            return response

        try:
            response, _ = call_with_retries(attempt, conn.policy, rng=conn.rng)
        except RetriesExhausted as exc:
            return Reply(error=str(exc))
        return to_reply(response)

    def act(self, turns: Sequence[Turn]) -> list[Reply]:
        if self._conn is None:
            self._conn = OpenAIModelHandler(self.cfg).load_model()
        conn = self._conn
        futures = [conn.pool.submit(self._one, conn, t) for t in turns]
        out = []
        for f in futures:
            try:
                out.append(f.result())
            except Exception as exc:  # a bug in a response's shape fails that episode only
                out.append(Reply(error=f"{type(exc).__name__}: {exc}"))
        return out

    def close(self) -> None:
        if self._conn is not None:
            self._conn.pool.shutdown(wait=False)
            self._conn = None
