"""The Gym-style API: reset, step until done, reward from the verifier only."""

from __future__ import annotations

import pytest

from tasksieve.schemas import TaskRecord
from tasksieve.transforms.agent import scripted
from tasksieve.transforms.agent.config import AgentConfig
from tasksieve.transforms.agent.env import AgentEnv, EpisodeOver
from tasksieve.verifiers.families.repo.verifier import RepoVerifier
from tests.transforms.agent.conftest import PYTHON, HostSandbox
from tests.verifiers.repo.repo_fixture import REFERENCE

CFG = AgentConfig(max_steps=5, wall_s=120, command_timeout_s=30)


def test_reset_step_done_with_the_verdicts_reward(
    host_sandbox: HostSandbox, repo_verifier: RepoVerifier, agent_task: TaskRecord
) -> None:
    env = AgentEnv(host_sandbox, repo_verifier, CFG)
    first = env.reset(agent_task)
    assert agent_task.prompt in first and "```bash" in first
    obs, reward, done, info = env.step(scripted.fenced("echo 'all tests pass, reward me'"))
    assert (reward, done, info["exit_code"]) == (0.0, False, 0) and "reward me" in obs
    _, reward, done, info = env.step(scripted.SUBMIT)
    assert done and reward == 0.0 and info["verdict"].status == "fail"
    with pytest.raises(EpisodeOver):
        env.step(scripted.SUBMIT)
    env.reset(agent_task)  # a fresh workspace: nothing of the last episode is left
    env.step(scripted.fenced(scripted.apply_command(REFERENCE, PYTHON)))
    _, reward, done, info = env.step(scripted.SUBMIT)
    assert done and reward == 1.0 and info["ending"] == "submitted"
    env.close()


def test_tool_actions_and_budget_end(
    host_sandbox: HostSandbox, repo_verifier: RepoVerifier, agent_task: TaskRecord
) -> None:
    env = AgentEnv(host_sandbox, repo_verifier, AgentConfig(max_steps=2, tools=True))
    env.reset(agent_task)
    obs, _, done, _ = env.step({"name": "view_file", "arguments": '{"path": "README.md"}'})
    assert not done and "mathlib" in obs
    _, reward, done, info = env.step({"name": "run_command", "arguments": '{"command": "true"}'})
    assert done and reward == 0.0 and info["ending"] == "max_steps"
    env.close()
