"""End to end: ``tasksieve curate --agent`` with recorded actions on a repo task.

Episode 0 applies the reference patch with a shell command and submits; episode 1 looks
around and submits. With a backend that opens workspaces the task is kept at pass rate 0.5
with its trajectories; with one that does not, both episodes are lost and the task is
rejected saying why (the run still publishes, every record accounted for).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tasksieve.pipeline.cli import main
from tasksieve.pipeline.curate.config import CurateConfig
from tasksieve.transforms.agent import scripted
from tasksieve.transforms.agent.config import AgentConfig
from tasksieve.transforms.rollouts.episode_state import EpisodeConfig
from tasksieve.verifiers.families.repo.snapshots import SnapshotStore
from tasksieve.verifiers.registry import make_sandbox
from tests.verifiers.repo.repo_fixture import REFERENCE, build_repo, make_task

FAST = ["--no-weak-tests", "--no-ambiguity", "--no-humaneval", "--reference-runs", "1"]
ROOT = Path(__file__).resolve().parents[2]


def _rows(out: Path, kind: str) -> list[dict[str, Any]]:
    return [
        r for f in sorted((out / kind).rglob("*.parquet")) for r in pq.read_table(f).to_pylist()
    ]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    tmp = tmp_path_factory.mktemp("agent")
    store = SnapshotStore(tmp / "store")
    task = make_task(store, build_repo(tmp / "repo"), task_id="repo/agent-cli")
    code = json.loads((ROOT / "examples/tasks/code.jsonl").read_text().splitlines()[0])
    src, rec, out = tmp / "tasks.jsonl", tmp / "replay.jsonl", tmp / "out"
    src.write_text(task.model_dump_json(exclude_none=True) + "\n" + json.dumps(code) + "\n")
    python = make_sandbox("process").python  # the interpreter the sandbox has
    rows = [
        {
            "task_id": task.id,
            "completion": scripted.fenced(scripted.apply_command(REFERENCE, python)),
        },
        {"task_id": task.id, "completion": scripted.fenced("ls")},
        {"task_id": task.id, "turn": 2, "episode": 0, "completion": scripted.SUBMIT},
        {"task_id": task.id, "turn": 2, "episode": 1, "completion": scripted.SUBMIT},
    ]
    rec.write_text("".join(json.dumps(r) + "\n" for r in rows))
    mp = pytest.MonkeyPatch()
    mp.setenv("TASKSIEVE_SNAPSHOT_STORE", str(store.root))
    argv = ["curate", "-i", str(src), "-o", str(out), "--sampler", "replay", "--replay", str(rec)]
    argv += ["--samples", "2", "--agent", "--too-hard", "0", "--too-easy", "1", "--quiet", *FAST]
    try:
        assert main(argv) == 0
        yield out
    finally:
        mp.undo()


@pytest.mark.slow
def test_agent_run_keeps_or_rejects_with_the_reason(run: Path) -> None:
    manifest = json.loads((run / "manifest.json").read_text())
    rejected = {r["record_id"]: r for r in _rows(run, "rejected")}
    assert rejected["code.add"]["reason"] == "verifier.unsupported"
    assert "repo tasks" in rejected["code.add"]["detail"]
    assert "repo/agent-cli" not in rejected, rejected.get("repo/agent-cli")
    (task,) = _rows(run, "tasks")
    assert (task["id"], task["k"], task["n"], task["episode_steps"]) == (
        "repo/agent-cli",
        1,
        2,
        [2, 2],
    )
    steps = _rows(run, "trajectories")
    assert len(steps) == 4 == manifest["counts"]["trajectory_steps"]
    assert {(s["episode"], s["episode_ending"], s["reward"]) for s in steps} == {
        (0, "submitted", 1.0),
        (1, "submitted", 0.0),
    }


def test_agent_refuses_turns_and_adaptive() -> None:
    with pytest.raises(ValueError, match="--agent runs episodes of its own"):
        CurateConfig(("x",), "o", agent=AgentConfig(), episodes=EpisodeConfig(turns=2))


def test_agent_flags_build_the_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tasksieve.pipeline.cli import build_parser
    from tasksieve.pipeline.flags.agent import HIDDEN, agent_config
    from tasksieve.transforms.agent.config import HIDDEN as CONFIG_HIDDEN

    assert HIDDEN == CONFIG_HIDDEN
    args = build_parser().parse_args(
        ["curate", "-i", "x", "-o", "y", "--agent", "--agent-max-steps", "7", "--agent-wall", "30"]
    )
    cfg = agent_config(args)
    assert cfg is not None and (cfg.max_steps, cfg.wall_s) == (7, 30.0)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["curate", "-i", "x", "-o", "y", "--agent-wall", "-1"])
    assert "must be > 0 seconds" in capsys.readouterr().err
