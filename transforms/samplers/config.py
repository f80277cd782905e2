"""Sampler configuration and the records a sampler consumes and produces."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from tasksieve.transforms.samplers.precision import DTYPES
from tasksieve.transforms.samplers.vllm_args import check_vllm_fields

BACKENDS: tuple[str, ...] = ("transformers", "replay", "openai", "vllm")


@dataclass(frozen=True)
class SamplerConfig:
    """How to draw K completions per task; validated at construction."""

    backend: str = "transformers"
    model: str | None = None
    samples: int = 4
    first_sample: int = 0  # index of the first sample drawn (adaptive rounds draw 4..7, ...)
    max_new_tokens: int = 256
    temperature: float = 0.8
    top_p: float = 0.95
    seed: int = 0
    batch_size: int = 8  # tasks per model call (transformers); a floor for servers
    replay_path: str | None = None
    cache_dir: str | None = None
    stop_after_code: bool = True  # end a sample once its fenced code block is closed
    dtype: str = "auto"  # transformers: auto, float32 or bfloat16 (see samplers.precision)
    stop: tuple[str, ...] = ()  # stop sequences passed to a server (openai backend)
    # openai backend: an OpenAI-compatible server (see tasksieve.transforms.samplers.openai_sampler)
    endpoint: str | None = None
    api_key_env: str | None = None  # name of the environment variable holding the key
    max_concurrency: int = 8  # requests in flight per worker
    request_timeout_s: float = 300.0
    max_attempts: int = 5  # per request, the first try included
    extra_body: str = ""  # JSON object merged into every request (server-specific fields)
    # vllm backend: Beam's vLLM handlers (see tasksieve.transforms.samplers.vllm_sampler)
    vllm_args: tuple[str, ...] = ()  # extra server flags, each "--name=value" or "--name"
    vllm_api: str = "chat"  # chat or completions
    accelerator: str | None = None  # Beam resource hint of the sampling step

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {self.backend!r}")
        if isinstance(self.samples, bool) or not isinstance(self.samples, int):
            raise ValueError(f"samples must be an integer >= 1, got {self.samples!r}")
        if self.samples < 1:
            raise ValueError(f"samples must be >= 1, got {self.samples}")
        if self.first_sample < 0:
            raise ValueError(f"first_sample must be >= 0, got {self.first_sample}")
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if not self.temperature >= 0:  # also rejects NaN
            raise ValueError(f"temperature must be >= 0 (0 means greedy), got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.seed < 0:
            raise ValueError(f"seed must be >= 0, got {self.seed}")
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {self.dtype!r}")
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {self.batch_size}")
        if self.backend == "replay" and not self.replay_path:
            raise ValueError(
                "backend 'replay' needs replay_path (a JSONL, JSONL.gz or Parquet file of "
                "{task_id, completion} rows)"
            )
        if self.backend != "replay" and self.replay_path:
            raise ValueError(
                f"replay_path is only used by backend 'replay'; set backend='replay' or drop "
                f"replay_path (backend is {self.backend!r})"
            )
        self._check_server()
        check_vllm_fields(self.backend, self.model, self.vllm_args, self.vllm_api, self.accelerator)

    def _check_server(self) -> None:
        """Validate the fields of the ``openai`` backend."""
        if self.backend == "openai" and not (self.endpoint and self.model):
            raise ValueError(
                "backend 'openai' needs endpoint (the server's base URL, e.g. "
                "http://localhost:8000/v1) and model (the name the server serves)"
            )
        if self.backend != "openai" and self.endpoint:
            raise ValueError(f"endpoint is only used by backend 'openai' (got {self.backend!r})")
        if self.max_concurrency < 1:
            raise ValueError(f"max_concurrency must be >= 1, got {self.max_concurrency}")
        if not self.request_timeout_s > 0:
            raise ValueError(f"request_timeout_s must be > 0, got {self.request_timeout_s}")
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, got {self.max_attempts}")
        if not isinstance(self.stop, tuple) or not all(isinstance(x, str) and x for x in self.stop):
            raise ValueError(f"stop must be a tuple of non-empty strings, got {self.stop!r}")
        if self.extra_body:
            try:
                body = json.loads(self.extra_body)
            except json.JSONDecodeError as e:
                raise ValueError(f"extra_body is not valid JSON ({e.msg})") from e
            if not isinstance(body, dict):
                raise ValueError(f"extra_body must be a JSON object, got {self.extra_body!r}")

    def extra_body_dict(self) -> dict[str, object]:
        """``extra_body`` parsed (an empty dict when unset)."""
        return dict(json.loads(self.extra_body)) if self.extra_body else {}


@dataclass(frozen=True)
class SampleRequest:
    """One task to sample completions for, or one later turn of one of its episodes.

    Turn 1 (the default) asks for K completions of the task's prompt. A later turn of a
    multi-turn episode (``transforms.rollouts.episode_state``) asks for one completion per request:
    ``history`` holds the conversation after the prompt as (role, content) pairs (the
    episode's earlier answers and the feedback on them, ending with a user message),
    ``turn`` its number and ``episode`` the episode's sample index. Every sampler renders
    the messages with ``prompts.render_messages`` and seeds with ``seeds.request_seed``, so
    history and seeding need nothing backend-specific.
    """

    task_id: str
    family: str
    prompt: str
    entry_point: str | None = None
    history: tuple[tuple[str, str], ...] = ()
    turn: int = 1
    episode: int | None = None
    system: str | None = None
    """Replaces the family's system instruction (agent episodes send their protocol here)."""


@dataclass(frozen=True)
class CompletionMeta:
    """What a sampler knows about how one completion was drawn (None: not known).

    Field names match the optional columns of ``schemas.Rollout``. ``seed`` is the seed of
    the request that produced the completion (several completions of one request share it);
    ``latency_s`` is that request's wall time (transformers: its batch's generate call).
    """

    prompt_hash: str | None = None
    turn: int = 1
    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None
    max_tokens: int | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str | None = None
    latency_s: float | None = None

    def columns(self) -> dict[str, Any]:
        """The Rollout columns this metadata fills."""
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


@dataclass(frozen=True)
class Samples:
    """The completions drawn for one task, and how many were asked for.

    A sampler may return fewer than ``requested`` (a replay file with fewer rows for the
    task); the pipeline scores the task on what it got and records the shortfall. ``error``
    set means the sampler failed the task (a server that kept failing): the pipeline rejects
    it as ``rollouts.sampler_error`` with that text, whatever completions it holds.
    ``meta``, when given, has one entry per completion.
    """

    task_id: str
    completions: list[str]
    model_id: str
    sampler: str
    requested: int
    meta: list[CompletionMeta] = field(default_factory=list)
    error: str | None = None

    def columns(self, index: int) -> dict[str, Any]:
        """The optional Rollout columns of completion ``index`` ({} when not recorded)."""
        return self.meta[index].columns() if index < len(self.meta) else {}

    @property
    def shortfall(self) -> int:
        """How many fewer completions than asked (0 when the sampler delivered K or more)."""
        return max(0, self.requested - len(self.completions))
