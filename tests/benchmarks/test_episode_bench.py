"""The agent-episode and workspace benchmarks in their smallest configurations: real sessions
(bubblewrap), real episodes, the verdict checks that make a wrong run exit 1."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from benchmarks import agent_episodes, open_profile, workspaces, ws_sessions
from benchmarks.agent_steps import actions, load_task, patched_file
from tasksieve.verifiers.sandbox.process.sandbox import ProcessSandbox
from tasksieve.verifiers.sandbox.workspace import WorkspaceSpec

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")


def _docker() -> bool:
    if shutil.which("docker") is None:
        return False
    done = subprocess.run(
        ["docker", "image", "inspect", "tasksieve-sandbox:latest"], capture_output=True
    )
    return done.returncode == 0


def test_actions_apply_the_reference_patch_of_a_shipped_task() -> None:
    task = load_task()
    steps = actions(task)
    assert len(steps) == agent_episodes.STEPS
    assert patched_file(task) in steps[2] and "apply_patch" in steps[3]


@needs_bwrap
def test_scripted_episodes_on_process_workspaces_all_right(capsys: pytest.CaptureFixture) -> None:
    argv = ["--levels", "1,2", "--episodes", "2", "--setups", "process"]
    assert agent_episodes.main(argv) == 0
    out = capsys.readouterr().out
    assert "| process | 1 | 2 |" in out and "| process | 2 | 2 |" in out
    assert "CPU per step at 2 / at 1" in out


@pytest.mark.slow
@pytest.mark.skipif(not _docker(), reason="needs Docker and the sandbox image")
def test_docker_exec_baseline_runs_the_same_actions(capsys: pytest.CaptureFixture) -> None:
    argv = ["--levels", "1", "--episodes", "1", "--setups", "docker exec"]
    assert agent_episodes.main(argv) == 0
    assert "| docker exec | 1 | 1 |" in capsys.readouterr().out


@needs_bwrap
@pytest.mark.parametrize("mode", ["cold", "zygote"])
def test_census_sees_an_open_session_and_nothing_after_close(tmp_path, mode: str) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "a.txt").write_text("x\n")
    sb = ProcessSandbox(warm=False, workspace_open=mode)
    try:
        before = ws_sessions._census()
        ws = sb.open_workspace(WorkspaceSpec(str(tmp_path)))
        during = ws_sessions._census()
        ws.close()
    finally:
        sb.close()
    after = ws_sessions._census(during)
    # its bubblewrap and agent at least; forked by the zygote, its agent (no shell yet)
    assert len(during.procs) >= len(before.procs) + (2 if mode == "cold" else 1)
    assert len(during.pid_ns) == len(before.pid_ns) + 1
    assert not after.procs and not after.pid_ns and not after.mnt_ns


@needs_bwrap
def test_idle_and_churn_smallest_run_leaks_nothing(capsys: pytest.CaptureFixture) -> None:
    assert workspaces.main(["--idle", "2", "--churn", "3", "--files", "20"]) == 0
    out = capsys.readouterr().out
    assert "2 idle sessions opened" in out and "2 answering" in out
    assert "PSS + tmpfs per session" in out
    assert "3 sessions open at once, 3 used fine" in out and "leaked: 0" in out


@needs_bwrap
def test_open_profile_names_every_phase(capsys: pytest.CaptureFixture) -> None:
    assert open_profile.main(["--n", "2"]) == 0
    out = capsys.readouterr().out
    for phase in ("start bubblewrap", "session cgroup", "guest: interpreter", "whole cold open"):
        assert phase in out
    assert "bubblewrap running /bin/true" in out


@pytest.mark.slow
@needs_bwrap
def test_repo_verify_quick_run_passes_every_verdict(capsys: pytest.CaptureFixture) -> None:
    from benchmarks import repo_verify

    assert repo_verify.main(["--quick"]) == 0
    out = capsys.readouterr().out
    assert "every verdict was pass" in out and "ours, process sandbox (workspace path)" in out
