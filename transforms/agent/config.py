"""The budgets and choices of agent episodes, validated at construction."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Hidden = Literal["fail_to_pass_files", "none"]
HIDDEN: tuple[str, ...] = ("fail_to_pass_files", "none")


@dataclass(frozen=True)
class AgentConfig:
    """How an episode runs and when it ends (see docs/agent.md for each budget).

    An episode ends on submit, after ``max_steps`` actions, once its tokens (prompt plus
    completion, as the sampler counts them, else estimated) reach ``max_tokens``, once
    ``wall_s`` seconds have passed since it started, after ``max_protocol_errors`` replies
    that broke the protocol, or when its session is gone. ``concurrency`` bounds the sandbox
    steps in flight per worker; ``hidden`` says which test files the agent does not see.
    """

    max_steps: int = 30
    max_tokens: int | None = 200_000
    wall_s: float = 900.0
    max_protocol_errors: int = 3
    observation_bytes: int = 10_000
    command_timeout_s: float = 60.0
    concurrency: int = 8
    hidden: Hidden = "fail_to_pass_files"
    tools: bool = False
    """OpenAI tool calling (the openai sampler only) instead of fenced shell commands."""
    max_processes: int = 64
    """Processes one session may hold (a fork bomb stops here)."""

    def __post_init__(self) -> None:
        for name in ("max_steps", "max_protocol_errors", "observation_bytes", "concurrency"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"agent {name} must be an integer >= 1, got {value!r}")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ValueError(f"agent max_tokens must be >= 1 or unset, got {self.max_tokens}")
        if not self.wall_s > 0 or not self.command_timeout_s > 0:
            raise ValueError(
                f"agent wall_s and command_timeout_s must be > 0, got {self.wall_s}, "
                f"{self.command_timeout_s}"
            )
        if self.hidden not in HIDDEN:
            raise ValueError(
                f"agent hidden must be one of {', '.join(HIDDEN)}, got {self.hidden!r}"
            )
        if self.max_processes < 8:
            raise ValueError(f"agent max_processes must be >= 8, got {self.max_processes}")
