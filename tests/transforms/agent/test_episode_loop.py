"""The episode loop over the host-workspace double, judged by the real repo verifier.

The double (``host_workspace``) has no isolation: these tests cover the loop's bookkeeping
(protocol, budgets, hidden tests, conversation, verdicts); hostile agents run only against
the real backends in ``test_agent_sandbox.py``.
"""

from __future__ import annotations

import dataclasses
import json

from tasksieve.schemas import TaskRecord
from tasksieve.transforms.agent import scripted
from tasksieve.transforms.agent.config import AgentConfig
from tasksieve.transforms.agent.driver import run_episodes
from tasksieve.transforms.agent.policies import Reply, ToolCall, Turn
from tasksieve.transforms.agent.scripted import ScriptedPolicy
from tasksieve.verifiers.families.repo.snapshots import SnapshotStore
from tasksieve.verifiers.families.repo.verifier import RepoVerifier
from tests.transforms.agent.conftest import PYTHON, HostSandbox, host_opener

CFG = AgentConfig(max_steps=8, wall_s=120, command_timeout_s=30)


def _run(sb, store, verifier, task, script, cfg=CFG, k=1):  # type: ignore[no-untyped-def]
    policy = ScriptedPolicy(script)
    return run_episodes(
        [(task, j) for j in range(k)], policy, host_opener(sb, store, cfg), verifier, cfg
    )


def test_solver_passes_and_idler_fails(
    host_sandbox: HostSandbox,
    agent_store: SnapshotStore,
    repo_verifier: RepoVerifier,
    agent_task: TaskRecord,
) -> None:
    scripts = {agent_task.id: scripted.solver(PYTHON)}
    (solved,) = _run(host_sandbox, agent_store, repo_verifier, agent_task, scripts)
    assert solved.ending == "submitted" and solved.verdict and solved.verdict.status == "pass", (
        solved.verdict
    )
    assert "mathlib/ops.py" in solved.diff
    assert [s.action.kind for s in solved.steps] == ["run", "run", "run", "submit"]
    (idle,) = _run(host_sandbox, agent_store, repo_verifier, agent_task, scripted.idler())
    assert idle.ending == "submitted" and idle.verdict and idle.verdict.status == "fail"


def test_hidden_tests_are_not_in_the_workspace(
    host_sandbox: HostSandbox,
    agent_store: SnapshotStore,
    repo_verifier: RepoVerifier,
    agent_task: TaskRecord,
) -> None:
    (ep,) = _run(
        host_sandbox,
        agent_store,
        repo_verifier,
        agent_task,
        scripted.steps("cat tests/test_ops.py"),
    )
    assert ep.steps[0].exit_code != 0 and "No such file" in ep.steps[0].observation


def test_editing_the_tests_does_not_pass(
    host_sandbox: HostSandbox,
    agent_store: SnapshotStore,
    repo_verifier: RepoVerifier,
    agent_task: TaskRecord,
) -> None:
    fake = "def test_sub():\n    pass\n\n\ndef test_sub_negative():\n    pass\n"
    script = scripted.steps(f"mkdir -p tests && cat > tests/test_ops.py <<'X'\n{fake}X")
    (ep,) = _run(host_sandbox, agent_store, repo_verifier, agent_task, script)
    assert ep.ending == "submitted" and ep.verdict and ep.verdict.status == "fail"


def test_protocol_errors_end_the_episode_counted(
    host_sandbox: HostSandbox,
    agent_store: SnapshotStore,
    repo_verifier: RepoVerifier,
    agent_task: TaskRecord,
) -> None:
    script = scripted.steps(
        "RAW:I think it is fixed.", "RAW:```bash\nls\n```\n```bash\npwd\n```", "RAW:done"
    )
    cfg = dataclasses.replace(CFG, max_protocol_errors=3)
    (ep,) = _run(host_sandbox, agent_store, repo_verifier, agent_task, script, cfg)
    assert ep.ending == "protocol_errors" and ep.protocol_errors == 3
    assert ep.verdict and ep.verdict.status == "fail"
    assert "Protocol error" in ep.messages[3]["content"]


def test_never_submitting_ends_on_the_step_budget(
    host_sandbox: HostSandbox,
    agent_store: SnapshotStore,
    repo_verifier: RepoVerifier,
    agent_task: TaskRecord,
) -> None:
    eps = _run(
        host_sandbox, agent_store, repo_verifier, agent_task, scripted.never_submits("echo hi"), k=3
    )
    assert [(e.ending, len(e.steps)) for e in eps] == [("max_steps", CFG.max_steps)] * 3
    assert all(e.verdict and e.verdict.status == "fail" for e in eps)


def test_token_and_wall_budgets(
    host_sandbox: HostSandbox,
    agent_store: SnapshotStore,
    repo_verifier: RepoVerifier,
    agent_task: TaskRecord,
) -> None:
    cfg = dataclasses.replace(CFG, max_tokens=400)
    (ep,) = _run(
        host_sandbox, agent_store, repo_verifier, agent_task, scripted.never_submits("echo hi"), cfg
    )
    assert ep.ending == "max_tokens" and ep.tokens >= 400 and len(ep.steps) < CFG.max_steps
    cfg = dataclasses.replace(CFG, wall_s=2.0, command_timeout_s=1.0)
    (ep,) = _run(
        host_sandbox, agent_store, repo_verifier, agent_task, scripted.never_submits("sleep 5"), cfg
    )
    assert ep.ending == "wall" and ep.steps[0].ended == "wall" and ep.wall_s < 10


def test_long_output_is_truncated_in_the_observation(
    host_sandbox: HostSandbox,
    agent_store: SnapshotStore,
    repo_verifier: RepoVerifier,
    agent_task: TaskRecord,
) -> None:
    cfg = dataclasses.replace(CFG, observation_bytes=200)
    script = scripted.steps("head -c 50000 /dev/zero | tr '\\0' x")
    (ep,) = _run(host_sandbox, agent_store, repo_verifier, agent_task, script, cfg)
    step = ep.steps[0]
    assert step.truncated and "bytes elided" in step.observation and len(step.observation) < 400


class ToolAgent:
    """Fixes the bug through the tool protocol: view, replace, submit."""

    tools, name, model_id = True, "tools-script", "tools-script"

    def act(self, turns: list[Turn]) -> list[Reply]:
        plan = [
            ("view_file", '{"path": "mathlib/ops.py"}'),
            (
                "replace_in_file",
                json.dumps(
                    {
                        "path": "mathlib/ops.py",
                        "old": "def sub(a, b):\n    return a + b",
                        "new": "def sub(a, b):\n    return a - b",
                    }
                ),
            ),
            ("submit", "{}"),
        ]
        out = []
        for t in turns:
            name, args = plan[t.step - 1]
            out.append(
                Reply(
                    tool_calls=(ToolCall(f"call{t.step}", name, args),), tokens_in=10, tokens_out=5
                )
            )
        return out

    def close(self) -> None:
        return None


def test_tool_protocol_solves(
    host_sandbox: HostSandbox,
    agent_store: SnapshotStore,
    repo_verifier: RepoVerifier,
    agent_task: TaskRecord,
) -> None:
    opener = host_opener(host_sandbox, agent_store, CFG)
    (ep,) = run_episodes([(agent_task, 0)], ToolAgent(), opener, repo_verifier, CFG)
    assert ep.verdict and ep.verdict.status == "pass", ep.verdict
    assert "return a + b" in ep.steps[0].observation
    assert ep.messages[3] == {
        "role": "tool",
        "tool_call_id": "call1",
        "content": ep.steps[0].observation,
    }
    assert ep.tokens == 45
