"""The policy of ``train --agent``: the model being trained, one token stream per episode.

``StreamPolicy`` answers the turns of many episodes (``transforms.agent.driver``) with one
batched ``generate`` per step. It keeps, per episode, the exact tokens the model was
conditioned on and produced, so what GRPO trains on is what was sampled:

- ``prompt_ids``: the chat template over the episode's system and user messages, with the
  assistant header (``add_generation_prompt``);
- ``completion_ids``: every reply's sampled tokens (mask 1) followed by the template's tokens
  for the observation that came back (mask 0): the reply's end-of-turn tag when the model did
  not close the turn itself, the user turn holding the observation, the next assistant header.

Each step generates from ``prompt_ids + completion_ids`` as they stand, never from a
re-rendered conversation, so no token the model saw differs from the one trained on. The
observation's tokens come from the template rendered around a placeholder reply (the text
after it), so they follow the model's chat format without re-tokenising the model's reply.

What it does NOT do: keep the sampling log-probabilities (TRL recomputes them; without vLLM
nothing needs them), or handle tool calling (the text protocol only).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tasksieve.transforms.agent.policies import Reply, Turn

MARK = "\x00TASKSIEVE_REPLY\x00"


@dataclass
class Stream:
    """One episode's tokens: the prompt, then replies (mask 1) and observations (mask 0)."""

    prompt_ids: list[int]
    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    closed: bool = True
    """Whether the last reply ended with the end-of-turn token."""

    def add(self, ids: Sequence[int], model: bool) -> None:
        self.completion_ids.extend(ids)
        self.env_mask.extend([1 if model else 0] * len(ids))

    @property
    def context(self) -> list[int]:
        return self.prompt_ids + self.completion_ids


class StreamPolicy:
    """The trainer's model behind the text protocol, batched across episodes."""

    tools = False
    name = "train"

    def __init__(
        self, model: Any, tokenizer: Any, max_new_tokens: int, temperature: float, model_id: str
    ) -> None:
        self.model, self.tokenizer = model, tokenizer
        self.max_new_tokens, self.temperature, self.model_id = max_new_tokens, temperature, model_id
        self.streams: dict[tuple[str, int], Stream] = {}
        eos = tokenizer.eos_token_id
        self.eos: int = int(eos if eos is not None else tokenizer.pad_token_id)
        self.pad: int = int(tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos)

    def _ids(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def _render(self, messages: Sequence[dict[str, Any]], generation: bool) -> str:
        text = self.tokenizer.apply_chat_template(
            list(messages), add_generation_prompt=generation, tokenize=False
        )
        return str(text)

    def observation_ids(
        self, head: Sequence[dict[str, Any]], observation: str, closed: bool
    ) -> list[int]:
        """The template's tokens after a reply: its end tag (unless the model closed the turn),
        the user turn holding ``observation``, the next assistant header."""
        convo = [
            *head,
            {"role": "assistant", "content": MARK},
            {"role": "user", "content": observation},
        ]
        text = self._render(convo, True).split(MARK, 1)[1]
        end = self.tokenizer.decode([self.eos])
        if closed and text.startswith(end):
            text = text[len(end) :]
        return self._ids(text)

    def prompt_stream(self, head: Sequence[dict[str, Any]]) -> Stream:
        """A new stream holding the prompt of the system and user messages ``head``."""
        return Stream(self._ids(self._render(head, True)))

    def _stream(self, turn: Turn) -> Stream:
        key = (turn.task.id, turn.episode)
        stream = self.streams.get(key)
        head = turn.messages[:2]
        if stream is None or turn.step == 1:
            stream = self.streams[key] = self.prompt_stream(head)
        else:
            observation = str(turn.messages[-1].get("content") or "")
            stream.add(self.observation_ids(head, observation, stream.closed), model=False)
        return stream

    def act(self, turns: Sequence[Turn]) -> list[Reply]:
        """One sampled reply per turn, all turns in one ``generate`` call."""
        import torch

        streams = [self._stream(t) for t in turns]
        contexts = [s.context for s in streams]
        width = max(len(c) for c in contexts)
        ids = torch.tensor([[self.pad] * (width - len(c)) + c for c in contexts])
        attention = torch.tensor([[0] * (width - len(c)) + [1] * len(c) for c in contexts])
        try:
            out = self._generate(ids, attention)
        except Exception as exc:  # the episodes end as policy_error; the step then fails
            return [Reply(error=f"generation failed: {type(exc).__name__}: {exc}")] * len(turns)
        replies = []
        for stream, row, context in zip(streams, out[:, width:].tolist(), contexts, strict=True):
            new = row[: row.index(self.eos) + 1] if self.eos in row else row
            stream.add(new, model=True)
            stream.closed = bool(new) and new[-1] == self.eos
            text = self.tokenizer.decode(new, skip_special_tokens=True)
            replies.append(Reply(text=text, tokens_in=len(context), tokens_out=len(new)))
        return replies

    def _generate(self, ids: Any, attention: Any) -> Any:
        import torch

        with torch.no_grad():
            return self.model.generate(
                input_ids=ids,
                attention_mask=attention,
                max_new_tokens=self.max_new_tokens,
                do_sample=True,
                temperature=self.temperature,
                top_k=0,
                top_p=1.0,
                pad_token_id=self.pad,
                eos_token_id=self.eos,
            )

    def take(self, task_id: str, episode: int) -> Stream | None:
        """The finished episode's stream, removed from the policy (None: it never replied)."""
        return self.streams.pop((task_id, episode), None)

    def close(self) -> None:
        self.streams.clear()
