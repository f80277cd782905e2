"""The AgentEpisodes Beam stage on the process sandbox's real workspaces, with recorded actions:
Scored with per-episode steps, one rollout row per episode, one trajectory row per step, and
a task of another family rejected."""

from __future__ import annotations

import json
from pathlib import Path

import apache_beam as beam
from apache_beam.testing.util import assert_that, equal_to

from tasksieve.schemas import TaskRecord
from tasksieve.transforms.agent import scripted
from tasksieve.transforms.agent.config import AgentConfig
from tasksieve.transforms.agent.stage import TRAJECTORIES, AgentEpisodes
from tasksieve.transforms.algorithms.stats import BandConfig
from tasksieve.transforms.rollouts.rounds import ROLLOUTS
from tasksieve.transforms.runtime.common import REJECTED
from tasksieve.transforms.samplers import SamplerConfig
from tasksieve.verifiers import SandboxConfig
from tasksieve.verifiers.families.repo.snapshots import SnapshotStore
from tasksieve.verifiers.families.repo.verifier import RepoVerifier
from tasksieve.verifiers.registry import make_sandbox
from tests.transforms.add_task import add_task, item_of
from tests.transforms.agent.conftest import reference_problem
from tests.verifiers.repo.repo_fixture import REFERENCE


def test_the_stage_scores_and_records_every_step(
    tmp_path: Path, agent_store: SnapshotStore, agent_task: TaskRecord
) -> None:
    sandbox = make_sandbox("process")
    assert sandbox.capabilities.workspaces
    assert reference_problem(RepoVerifier(sandbox, agent_store), agent_task) is None
    fix = scripted.fenced(scripted.apply_command(REFERENCE, sandbox.python))
    rows = [
        {"task_id": agent_task.id, "completion": fix},
        {"task_id": agent_task.id, "completion": scripted.fenced("ls")},
        {"task_id": agent_task.id, "turn": 2, "episode": 0, "completion": scripted.SUBMIT},
        {"task_id": agent_task.id, "turn": 2, "episode": 1, "completion": scripted.SUBMIT},
    ]
    replay = tmp_path / "replay.jsonl"
    replay.write_text("".join(json.dumps(r) + "\n" for r in rows))
    sampler = SamplerConfig(backend="replay", replay_path=str(replay), samples=2)
    box = SandboxConfig(backend="process", snapshot_store=str(agent_store.root))
    stage = AgentEpisodes(sampler, AgentConfig(max_steps=4), box, "run1", BandConfig(0.0, 1.0))
    items = [item_of(agent_task), item_of(add_task("def add(a, b):\n    return a + b\n"))]
    with beam.Pipeline() as p:
        out = p | beam.Create(items) | stage
        scored = out["ok"] | "S" >> beam.Map(lambda s: (s.item.id, s.n, s.k, s.episode_steps))
        assert_that(scored, equal_to([(agent_task.id, 2, 1, [2, 2])]))
        steps = out[TRAJECTORIES] | "T" >> beam.Map(
            lambda r: (r["episode"], r["step"], r["action_kind"], r["episode_ending"])
        )
        want = [(j, 1, "run", "submitted") for j in (0, 1)]
        want += [(j, 2, "submit", "submitted") for j in (0, 1)]
        assert_that(steps, equal_to(want), label="Steps")
        rollouts = out[ROLLOUTS] | "R" >> beam.Map(lambda r: (r["sample_index"], r["turn"]))
        assert_that(rollouts, equal_to([(0, 2), (1, 2)]), label="Rollouts")
        reasons = out[REJECTED] | "J" >> beam.Map(lambda r: (r["record_id"], r["reason"]))
        assert_that(reasons, equal_to([("t.add", "verifier.unsupported")]), label="Rejected")
