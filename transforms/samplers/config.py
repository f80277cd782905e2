"""Sampler configuration and the records a sampler consumes and produces."""

from __future__ import annotations

from dataclasses import dataclass

BACKENDS: tuple[str, ...] = ("transformers", "replay")


@dataclass(frozen=True)
class SamplerConfig:
    """How to draw K completions per task; validated at construction."""

    backend: str = "transformers"
    model: str | None = None
    samples: int = 4
    max_new_tokens: int = 256
    temperature: float = 0.8
    top_p: float = 0.95
    seed: int = 0
    batch_size: int = 4
    replay_path: str | None = None
    cache_dir: str | None = None
    stop_after_code: bool = True  # end a sample once its fenced code block is closed

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {self.backend!r}")
        if isinstance(self.samples, bool) or not isinstance(self.samples, int):
            raise ValueError(f"samples must be an integer >= 1, got {self.samples!r}")
        if self.samples < 1:
            raise ValueError(f"samples must be >= 1, got {self.samples}")
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if not self.temperature >= 0:  # also rejects NaN
            raise ValueError(f"temperature must be >= 0 (0 means greedy), got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.seed < 0:
            raise ValueError(f"seed must be >= 0, got {self.seed}")
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


@dataclass(frozen=True)
class SampleRequest:
    """One task to sample completions for."""

    task_id: str
    family: str
    prompt: str
    entry_point: str | None = None


@dataclass(frozen=True)
class Samples:
    """The completions drawn for one task, and how many were asked for.

    A sampler may return fewer than ``requested`` (a replay file with fewer rows for the
    task); the pipeline scores the task on what it got and records the shortfall.
    """

    task_id: str
    completions: list[str]
    model_id: str
    sampler: str
    requested: int

    @property
    def shortfall(self) -> int:
        """How many fewer completions than asked (0 when the sampler delivered K or more)."""
        return max(0, self.requested - len(self.completions))
