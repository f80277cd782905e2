"""``curate --agent`` on a synthesized repo task, on both workspace backends, end to end.

The task is one of ``examples/tasks/repo.jsonl`` (made by ``tasksieve synth repo``: a bug
injected into a real package whose suite passed), its snapshot in ``examples/snapshots``.
Episode 0 applies the task's reference patch with a shell command and submits; episode 1 looks
around and submits. The run keeps the task at pass rate 1 of 2 and writes both trajectories
(one row per step, with the episode's ending and reward). Skipped where the backend opens no
workspaces or cannot start here (no Docker engine or image).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tasksieve.pipeline.cli import main
from tasksieve.transforms.agent import scripted
from tasksieve.verifiers.registry import make_sandbox
from tasksieve.verifiers.sandbox.base import SandboxUnavailable
from tests.verifiers.repo.wheels import wheelhouse

ROOT = Path(__file__).resolve().parents[2]
TASK_ID = "repo.inflection.e77c25a418d8"  # one fail_to_pass test; needs no optional package
FAST = ["--no-weak-tests", "--no-ambiguity", "--no-humaneval", "--reference-runs", "1"]


def _rows(out: Path, kind: str) -> list[dict[str, Any]]:
    return [
        r for f in sorted((out / kind).rglob("*.parquet")) for r in pq.read_table(f).to_pylist()
    ]


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["process", pytest.param("docker", marks=pytest.mark.docker)])
def test_a_scripted_agent_solves_a_synthesized_task_and_another_fails_it(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    try:
        sb = make_sandbox(backend)
    except (SandboxUnavailable, ImportError, RuntimeError) as exc:
        pytest.skip(f"{backend} sandbox unavailable: {exc}")
    try:
        if not sb.capabilities.workspaces:
            pytest.skip(f"the {backend} backend opens no workspaces here")
        python = sb.python
    finally:
        sb.close()
    lines = (ROOT / "examples/tasks/repo.jsonl").read_text().splitlines()
    (task,) = [json.loads(ln) for ln in lines if json.loads(ln)["id"] == TASK_ID]
    src, rec, out = tmp_path / "tasks.jsonl", tmp_path / "replay.jsonl", tmp_path / "out"
    src.write_text(json.dumps(task) + "\n")
    apply = scripted.apply_command(task["reference_solution"], python)
    rows = [
        {"task_id": TASK_ID, "completion": scripted.fenced(apply)},
        {"task_id": TASK_ID, "completion": scripted.fenced("ls")},
        {"task_id": TASK_ID, "turn": 2, "episode": 0, "completion": scripted.SUBMIT},
        {"task_id": TASK_ID, "turn": 2, "episode": 1, "completion": scripted.SUBMIT},
    ]
    rec.write_text("".join(json.dumps(r) + "\n" for r in rows))
    store = tmp_path / "store"  # the task's snapshot alone: environments get built here
    snap = task["verifier"]["snapshot"].split(":")[-1]
    shutil.copytree(ROOT / "examples/snapshots" / snap, store / snap, symlinks=True)
    monkeypatch.setenv("TASKSIEVE_SNAPSHOT_STORE", str(store))
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # offline: pytest's wheels from this interpreter
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheelhouse(["pytest"], tmp_path / "wheels")))
    argv = ["curate", "-i", str(src), "-o", str(out), "--sandbox", backend]
    argv += ["--sampler", "replay", "--replay", str(rec), "--samples", "2", "--agent"]
    argv += ["--too-hard", "0", "--too-easy", "1", "--quiet", *FAST]
    assert main(argv) == 0
    rejected = _rows(out, "rejected")
    assert not rejected, rejected
    (kept,) = _rows(out, "tasks")
    assert (kept["id"], kept["k"], kept["n"], kept["episode_steps"]) == (TASK_ID, 1, 2, [2, 2])
    steps = _rows(out, "trajectories")
    assert {(s["episode"], s["step"], s["episode_ending"], s["reward"]) for s in steps} == {
        (0, 1, "submitted", 1.0),
        (0, 2, "submitted", 1.0),
        (1, 1, "submitted", 0.0),
        (1, 2, "submitted", 0.0),
    }, steps
    assert any(s["action"] == apply for s in steps if s["episode"] == 0), steps
    ran = [s for s in steps if s["action_kind"] == "run"]
    assert ran and all(s["cpu_s"] is not None and s["cpu_s"] >= 0 for s in ran), ran
    assert all(s["cpu_s"] is None for s in steps if s["action_kind"] == "submit"), steps
