"""The curate run's configuration: one frozen dataclass composed of the stages' configs."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from tasksieve.transforms.agent.config import AgentConfig
from tasksieve.transforms.algorithms.adaptive_stopping import AdaptiveConfig
from tasksieve.transforms.algorithms.stats import BandConfig
from tasksieve.transforms.decontam.stage import DecontamConfig
from tasksieve.transforms.dedup.near import DedupConfig
from tasksieve.transforms.reliability.gates import GatesConfig
from tasksieve.transforms.rollouts.cache import CacheConfig
from tasksieve.transforms.rollouts.episode_state import EpisodeConfig
from tasksieve.transforms.samplers import SamplerConfig
from tasksieve.verifiers import SandboxConfig
from tasksieve.verifiers.reliability import AmbiguityConfig, StrengthConfig


@dataclass(frozen=True)
class CurateConfig:
    """Everything that decides what a curate run produces (its fingerprint covers it all)."""

    inputs: tuple[str, ...]
    output: str
    dedup: DedupConfig = field(default_factory=DedupConfig)
    decontam: DecontamConfig = field(default_factory=DecontamConfig)
    gates: GatesConfig = field(default_factory=GatesConfig)
    strength: StrengthConfig = field(default_factory=StrengthConfig)
    ambiguity: AmbiguityConfig = field(default_factory=AmbiguityConfig)
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)
    sampler: SamplerConfig = field(default_factory=SamplerConfig)
    band: BandConfig = field(default_factory=BandConfig)
    episodes: EpisodeConfig = field(default_factory=EpisodeConfig)
    """Multi-turn episodes (``--turns``; one turn: the one-shot Rollouts and Verify stages)."""
    adaptive: AdaptiveConfig | None = None
    """Sample in rounds and stop a task once its label is settled (``--adaptive``)."""
    agent: AgentConfig | None = None
    """Agent episodes over repo tasks (``--agent``, tasksieve.transforms.agent)."""
    overwrite: bool = False
    runner: str = "DirectRunner"
    beam_args: tuple[str, ...] = ()
    expectations: bool = False
    """Run the data-quality suites before publishing (tasksieve.pipeline.outputs.checks.run)."""
    cache: CacheConfig = field(default_factory=CacheConfig)
    """The rollout cache (tasksieve.transforms.rollouts.cache): reused completions and verdicts."""

    def __post_init__(self) -> None:
        if not self.inputs:
            raise ValueError("need at least one --input path or glob")
        if not self.output:
            raise ValueError("need an --output directory")
        self._check_adaptive()
        if self.agent is not None and (self.adaptive is not None or self.episodes.turns > 1):
            raise ValueError(
                "--agent runs episodes of its own: drop --adaptive and --turns (an agent "
                "episode already acts over many steps)"
            )

    def _check_adaptive(self) -> None:
        """``--adaptive`` takes its maximum from ``--samples`` and samples single turns."""
        if self.adaptive is None:
            return
        if self.adaptive.max_samples != self.sampler.samples:
            raise ValueError(
                f"with --adaptive, --samples is the maximum per task: adaptive.max_samples "
                f"({self.adaptive.max_samples}) must equal sampler.samples ({self.sampler.samples})"
            )
        self.episodes.check_not_adaptive(True)

    def cache_dir(self) -> str | None:
        """The rollout cache directory of this run (None with the cache off)."""
        return self.cache.directory(self.output)

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def fingerprint(self) -> str:
        """Stable hash of what shapes the results (not where they go or how Beam runs)."""
        data = self.as_dict()
        for key in ("output", "overwrite", "runner", "beam_args", "expectations", "cache"):
            data.pop(key)
        for where in ("urls", "token_env", "priority"):  # where the sandbox service runs
            data["sandbox"].pop(where, None)
        for key in ("cache_dir", "max_concurrency", "api_key_env", "accelerator"):  # how, not what
            data["sampler"].pop(key, None)
        if self.episodes.turns == 1:  # one-turn runs keep their earlier fingerprint
            data.pop("episodes")
        if data["agent"] is None:  # runs without agents keep their earlier fingerprint
            data.pop("agent")
        if data["adaptive"] is None:  # fingerprints of fixed-K runs stay as they were
            data.pop("adaptive")
        if data["sampler"].get("first_sample") == 0:
            data["sampler"].pop("first_sample")
        data["dedup"].pop("index_lookup", None)  # how the index is met, not what it holds
        blob = json.dumps(data, sort_keys=True, default=str).encode()
        return hashlib.sha256(blob).hexdigest()[:16]
