"""Policies: recorded actions through the replay sampler, tool calls through a real openai
client against a scripted chat server on loopback, both judged by the real repo verifier."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tasksieve.schemas import TaskRecord
from tasksieve.transforms.agent import scripted
from tasksieve.transforms.agent.config import AgentConfig
from tasksieve.transforms.agent.driver import run_episodes
from tasksieve.transforms.agent.policies import SamplerPolicy
from tasksieve.transforms.samplers import SamplerConfig
from tasksieve.verifiers.families.repo.snapshots import SnapshotStore
from tasksieve.verifiers.families.repo.verifier import RepoVerifier
from tests.transforms.agent.conftest import PYTHON, HostSandbox, host_opener

CFG = AgentConfig(max_steps=6, wall_s=120, command_timeout_s=30)


def _fix_command() -> str:
    from tests.verifiers.repo.repo_fixture import REFERENCE

    return scripted.apply_command(REFERENCE, PYTHON)


def test_replayed_actions_run_as_recorded(
    tmp_path: Path,
    host_sandbox: HostSandbox,
    agent_store: SnapshotStore,
    repo_verifier: RepoVerifier,
    agent_task: TaskRecord,
) -> None:
    tid = agent_task.id
    rows = [
        {"task_id": tid, "completion": scripted.fenced("ls mathlib")},  # episode 0, step 1
        {"task_id": tid, "completion": scripted.fenced("ls")},  # episode 1, step 1
        {"task_id": tid, "turn": 2, "episode": 0, "completion": scripted.fenced(_fix_command())},
        {"task_id": tid, "turn": 3, "episode": 0, "completion": scripted.SUBMIT},
        {"task_id": tid, "turn": 2, "episode": 1, "completion": scripted.SUBMIT},
    ]
    path = tmp_path / "actions.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    policy = SamplerPolicy(SamplerConfig(backend="replay", replay_path=str(path)))
    opener = host_opener(host_sandbox, agent_store, CFG)
    eps = run_episodes([(agent_task, 0), (agent_task, 1)], policy, opener, repo_verifier, CFG)
    assert [len(e.steps) for e in eps] == [3, 2]
    assert eps[0].steps[0].observation.endswith("__init__.py\nops.py\n")
    assert [e.verdict.status for e in eps if e.verdict] == ["pass", "fail"]


def test_replay_running_out_is_a_policy_error(
    tmp_path: Path,
    host_sandbox: HostSandbox,
    agent_store: SnapshotStore,
    repo_verifier: RepoVerifier,
    agent_task: TaskRecord,
) -> None:
    path = tmp_path / "short.jsonl"
    path.write_text(json.dumps({"task_id": agent_task.id, "completion": scripted.fenced("ls")}))
    policy = SamplerPolicy(SamplerConfig(backend="replay", replay_path=str(path)))
    opener = host_opener(host_sandbox, agent_store, CFG)
    (ep,) = run_episodes([(agent_task, 0)], policy, opener, repo_verifier, CFG)
    assert ep.ending == "policy_error" and ep.verdict and ep.verdict.status == "infra_error"


class ChatServer(BaseHTTPRequestHandler):
    """Answers chat completions with the next tool call of a fixed plan, by step."""

    plan: list[tuple[str, dict[str, Any]]] = []
    seen: list[dict[str, Any]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).seen.append(body)
        step = sum(m["role"] == "assistant" for m in body["messages"])
        name, args = self.plan[min(step, len(self.plan) - 1)]
        call = {
            "id": f"c{step}",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(args)},
        }
        answer = {
            "id": "x",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "tool_calls",
                    "message": {"role": "assistant", "content": None, "tool_calls": [call]},
                }
            ],
            "usage": {"prompt_tokens": 100, "completion_tokens": 7, "total_tokens": 107},
        }
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        return None


@pytest.fixture()
def chat_server() -> Iterator[str]:
    pytest.importorskip("openai", reason="pip install 'tasksieve[openai]'")
    server = ThreadingHTTPServer(("127.0.0.1", 0), ChatServer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_openai_tool_calls_solve(
    chat_server: str,
    host_sandbox: HostSandbox,
    agent_store: SnapshotStore,
    repo_verifier: RepoVerifier,
    agent_task: TaskRecord,
) -> None:
    from tasksieve.transforms.agent.tool_policy import OpenAIToolPolicy

    ChatServer.seen = []
    ChatServer.plan = [
        ("run_command", {"command": "ls mathlib"}),
        ("view_file", {"path": "mathlib/ops.py", "start_line": 8, "end_line": 9}),
        (
            "replace_in_file",
            {
                "path": "mathlib/ops.py",
                "old": "def sub(a, b):\n    return a + b",
                "new": "def sub(a, b):\n    return a - b",
            },
        ),
        ("submit", {}),
    ]
    cfg = SamplerConfig(backend="openai", endpoint=chat_server, model="m", max_attempts=1)
    policy = OpenAIToolPolicy(cfg)
    opener = host_opener(host_sandbox, agent_store, CFG)
    try:
        (ep,) = run_episodes([(agent_task, 0)], policy, opener, repo_verifier, CFG)
    finally:
        policy.close()
    assert ep.verdict and ep.verdict.status == "pass", ep.verdict
    assert [s.action.kind for s in ep.steps] == ["run", "view", "replace", "submit"]
    assert "     8\tdef sub(a, b):" in ep.steps[1].observation
    assert ep.tokens == 4 * 107 and ep.steps[0].tokens_in == 100
    last = ChatServer.seen[-1]
    assert [t["function"]["name"] for t in last["tools"]] == [
        "run_command",
        "view_file",
        "replace_in_file",
        "submit",
    ]
    assert last["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "c2",
        "content": ep.steps[2].observation,
    }
