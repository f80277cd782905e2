"""The config of one ``tasksieve eval`` run: what to evaluate, with which sampler, which k."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any

from tasksieve.transforms.agent.config import AgentConfig
from tasksieve.transforms.rollouts.episode_state import EpisodeConfig
from tasksieve.transforms.samplers import SamplerConfig
from tasksieve.verifiers import SandboxConfig

DEFAULT_KS: tuple[int, ...] = (1,)


@dataclass(frozen=True)
class EvalConfig:
    """One evaluation: the tasks (``inputs``), the sampler and sandbox, the ks to report.

    ``inputs`` is either one curated output (a run or a publish root) or task files, which are
    validated first exactly as curate validates them. ``ks`` must not exceed the samples per
    task (a pass@k needs at least k samples of every task).
    """

    inputs: tuple[str, ...]
    output: str
    sampler: SamplerConfig
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)
    episodes: EpisodeConfig = field(default_factory=EpisodeConfig)
    agent: AgentConfig | None = None
    """Agent episodes over repo tasks (``--agent``, ``pipeline.eval.agent``)."""
    ks: tuple[int, ...] = DEFAULT_KS
    overwrite: bool = False
    runner: str = "DirectRunner"
    beam_args: tuple[str, ...] = ()
    resamples: int = 2000

    def __post_init__(self) -> None:
        if not self.inputs:
            raise ValueError("no input: give a curated output or task files (--input)")
        if not self.ks or any(isinstance(k, bool) or k < 1 for k in self.ks):
            raise ValueError(f"--k needs integers >= 1, got {list(self.ks)}")
        too_big = [k for k in self.ks if k > self.sampler.samples]
        if too_big:
            raise ValueError(
                f"--k {too_big[0]} exceeds --samples {self.sampler.samples}: pass@k needs at "
                "least k samples per task (raise --samples or drop that k)"
            )
        if self.agent is not None and self.episodes.turns > 1:
            raise ValueError(
                "--agent runs episodes of its own: drop --turns (an agent acts step by step "
                "in its workspace instead of answering again after feedback)"
            )
        if self.resamples < 100:
            raise ValueError(f"--resamples must be >= 100, got {self.resamples}")

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["sampler"].pop("cache_dir", None)
        if data["agent"] is None:  # evals without agents keep their earlier fingerprint
            data.pop("agent")
        return data

    def fingerprint(self) -> str:
        """sha256 of what decides the results (the output path and overwrite left out)."""
        data = self.as_dict()
        for volatile in ("output", "overwrite"):
            data.pop(volatile, None)
        text = json.dumps(data, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]
