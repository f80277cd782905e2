"""Trajectory rows and the episode's rollout row: schema, Parquet, DuckDB views, scoring."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from tasksieve.pipeline.outputs.catalog.agent_sql import (
    AGENT_MACRO_STATEMENTS,
    agent_view_statements,
)
from tasksieve.pipeline.outputs.layout import RunLayout
from tasksieve.pipeline.outputs.report.agent import agent_section
from tasksieve.schemas import Rollout
from tasksieve.schemas.arrow import ROLLOUTS_SCHEMA, TRAJECTORIES_SCHEMA
from tasksieve.schemas.task import TaskRecord
from tasksieve.transforms.agent import scripted
from tasksieve.transforms.agent.config import AgentConfig
from tasksieve.transforms.agent.driver import run_episodes
from tasksieve.transforms.agent.rows import rollout_row, trajectory_rows
from tasksieve.transforms.agent.scripted import ScriptedPolicy
from tasksieve.transforms.agent.stage import score_task
from tasksieve.transforms.algorithms.stats import BandConfig
from tasksieve.transforms.runtime.items import Item
from tasksieve.verifiers.families.repo.snapshots import SnapshotStore
from tasksieve.verifiers.families.repo.verifier import RepoVerifier
from tests.transforms.agent.conftest import PYTHON, HostSandbox, host_opener

CFG = AgentConfig(max_steps=4, wall_s=120, command_timeout_s=30)


def test_rows_land_in_parquet_and_the_views(
    tmp_path: Path,
    host_sandbox: HostSandbox,
    agent_store: SnapshotStore,
    repo_verifier: RepoVerifier,
    agent_task: TaskRecord,
) -> None:
    solve, idle, loop = scripted.solver(PYTHON), scripted.idler(), scripted.never_submits("ls")

    def script(turn):  # type: ignore[no-untyped-def]
        return (solve, idle, loop)[turn.episode](turn)

    policy = ScriptedPolicy(script)
    opener = host_opener(host_sandbox, agent_store, CFG)
    eps = run_episodes([(agent_task, j) for j in range(3)], policy, opener, repo_verifier, CFG)
    rows = [r for e in eps for r in trajectory_rows(e, "run1", "scripted")]
    (tmp_path / "trajectories").mkdir()
    traj = tmp_path / "trajectories" / "part-0.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=TRAJECTORIES_SCHEMA), traj)
    rollouts = [rollout_row(e, "run1", "scripted", "scripted") for e in eps]
    assert Rollout.model_validate(rollouts[0]).solution == eps[0].diff
    pa.Table.from_pylist(rollouts, schema=ROLLOUTS_SCHEMA)  # the shard schema takes them

    con = duckdb.connect()
    for sql in [*agent_view_statements(f"read_parquet('{traj}')"), *AGENT_MACRO_STATEMENTS]:
        con.execute(sql)
    got = con.execute(
        "select episode, steps, ending, passed, reward from episodes order by 1"
    ).fetchall()
    assert got == [
        (0, 4, "submitted", True, 1.0),
        (1, 3, "submitted", False, 0.0),
        (2, 4, "max_steps", False, 0.0),
    ]
    endings = dict(con.execute("select ending, episodes from episode_endings()").fetchall())
    assert endings == {"submitted": 2, "max_steps": 1}
    steps = con.execute(
        f"select step, action_kind from trajectory_of('{agent_task.id}', 0)"
    ).fetchall()
    assert steps == [(1, "run"), (2, "run"), (3, "run"), (4, "submit")]

    item = Item(task=agent_task, source_file="x", source_line=1, input_sha256="0" * 64)
    scored, _ = score_task(item, eps, 3, "scripted", BandConfig())
    assert scored is not None and (scored.k, scored.n) == (1, 3)
    assert scored.episode_steps == [4, 3, 4] and scored.passing[0][0] == 0

    # the report's section: the endings and the passing episode of the kept task
    (tmp_path / "manifest.json").write_text("{}")
    (tmp_path / "tasks" / "repo").mkdir(parents=True)
    pq.write_table(pa.table({"id": [agent_task.id]}), tmp_path / "tasks" / "repo" / "p.parquet")
    html = agent_section(RunLayout.find(tmp_path))
    assert "<h2>Agent episodes</h2>" in html and "3 episodes, 11 steps" in html
    assert f"{agent_task.id}, episode 0: submitted, pass, reward 1.0" in html
