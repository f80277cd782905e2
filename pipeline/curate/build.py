"""Assemble the curate pipeline from the stage transforms."""

from __future__ import annotations

import apache_beam as beam

from tasksieve.pipeline.curate.config import CurateConfig
from tasksieve.transforms.agent.stage import TRAJECTORIES, AgentEpisodes
from tasksieve.transforms.decontam.stage import Decontaminate
from tasksieve.transforms.dedup.exact import ExactDedup
from tasksieve.transforms.dedup.near import NearDedup
from tasksieve.transforms.filter import Filter
from tasksieve.transforms.ingest.stage import Ingest
from tasksieve.transforms.ingest.validate import Validate
from tasksieve.transforms.reliability.detectors import Ambiguity, TestStrength
from tasksieve.transforms.reliability.gates import Gates
from tasksieve.transforms.rollouts.adaptive import AdaptiveRollouts
from tasksieve.transforms.rollouts.multi_turn import Episodes
from tasksieve.transforms.rollouts.rounds import ROLLOUTS, Rollouts, Verify
from tasksieve.transforms.runtime.common import REJECTED
from tasksieve.transforms.runtime.progress import channel
from tasksieve.transforms.write import Write


def build(p: beam.Pipeline, cfg: CurateConfig, root: str, run_id: str) -> None:
    """Add every stage of the data flow to ``p``, writing below ``root``."""
    fp = cfg.fingerprint()
    records = p | "Ingest" >> Ingest(cfg.inputs, progress=channel())
    valid = records | "Validate" >> Validate(run_id)
    exact = valid["ok"] | "ExactDedup" >> ExactDedup(run_id)
    near = exact["ok"] | "NearDedup" >> NearDedup(cfg.dedup, run_id)
    clean = near["ok"] | "Decontaminate" >> Decontaminate(cfg.decontam, run_id)
    cache = cfg.cache_dir()  # samples, verdicts and gate/detector outcomes by content
    gated = clean["ok"] | "Gates" >> Gates(cfg.gates, cfg.sandbox, run_id, cache)
    strong, strength_rejected = gated["ok"], []
    if cfg.strength.enabled:
        strength = TestStrength(cfg.strength, cfg.sandbox, run_id, cache)
        measured = strong | "TestStrength" >> strength
        strong, strength_rejected = measured["ok"], [measured[REJECTED]]
    sampler_rejected = []
    outputs = {}
    if cfg.agent is not None:
        verified = strong | "AgentEpisodes" >> AgentEpisodes(
            cfg.sampler, cfg.agent, cfg.sandbox, run_id, cfg.band
        )
        outputs[TRAJECTORIES] = verified[TRAJECTORIES]
    elif cfg.episodes.turns > 1:
        verified = strong | "Episodes" >> Episodes(
            cfg.sampler, cfg.episodes, cfg.sandbox, run_id, cfg.band, cfg.gates.retry, cache
        )
    elif cfg.adaptive is not None:
        verified = strong | "AdaptiveRollouts" >> AdaptiveRollouts(
            cfg.sampler, cfg.adaptive, cfg.sandbox, run_id, cfg.band, cfg.gates.retry, cache
        )
    else:
        sampled = strong | "Rollouts" >> Rollouts(cfg.sampler, run_id, cache)
        sampler_rejected = [sampled[REJECTED]]
        verified = sampled["ok"] | "Verify" >> Verify(
            cfg.sandbox, run_id, cfg.band, cfg.gates.retry, cache
        )
    scored, ambiguity_rejected = verified["ok"], []
    if cfg.ambiguity.enabled:
        compared = scored | "Ambiguity" >> Ambiguity(cfg.ambiguity, cfg.sandbox, run_id, cache)
        scored, ambiguity_rejected = compared["ok"], [compared[REJECTED]]
    kept = scored | "Filter" >> Filter(cfg.band, run_id, fp)
    rejected = (
        valid[REJECTED],
        exact[REJECTED],
        near[REJECTED],
        clean[REJECTED],
        gated[REJECTED],
        *strength_rejected,
        *sampler_rejected,
        verified[REJECTED],
        *ambiguity_rejected,
        kept[REJECTED],
    ) | "AllRejected" >> beam.Flatten()
    _ = {
        "tasks": kept["ok"],
        "rejected": rejected,
        "rollouts": verified[ROLLOUTS],
        **outputs,
    } | "Write" >> Write(root, fp, run_id)
