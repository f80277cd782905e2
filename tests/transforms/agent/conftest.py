"""Fixtures of the agent tests: one repo task and store per session, the host-workspace double
for the loop's bookkeeping, and the real repo verifier on the process sandbox."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tasksieve.schemas import TaskRecord
from tasksieve.transforms.agent.config import AgentConfig
from tasksieve.transforms.agent.session import Opener
from tasksieve.verifiers.families.repo.environments import host_site_paths
from tasksieve.verifiers.families.repo.snapshots import SnapshotStore
from tasksieve.verifiers.families.repo.verifier import RepoVerifier
from tasksieve.verifiers.sandbox.base import Capabilities, Execution, Limits, Sandbox
from tasksieve.verifiers.sandbox.process.sandbox import ProcessSandbox
from tasksieve.verifiers.sandbox.workspace import Workspace, WorkspaceSpec
from tests.transforms.agent.host_workspace import HostWorkspace
from tests.verifiers.repo.repo_fixture import build_repo, make_task

PYTHON = sys.executable


class HostSandbox(Sandbox):
    """Opens ``HostWorkspace`` doubles; runs nothing else (the verifier has its own sandbox)."""

    name = "host-double"

    def __init__(self) -> None:
        self.capabilities = Capabilities(workspaces=True, site_packages=tuple(host_site_paths()))
        self.opened: list[HostWorkspace] = []

    def run(self, files, command, limits: Limits, stdin=b"", collect=()) -> Execution:  # type: ignore[no-untyped-def]
        raise NotImplementedError("the host double only opens workspaces")

    def open_workspace(self, spec: WorkspaceSpec) -> Workspace:
        ws = HostWorkspace(spec.snapshot)
        self.opened.append(ws)
        return ws


@pytest.fixture(scope="session")
def agent_store(tmp_path_factory: pytest.TempPathFactory) -> SnapshotStore:
    return SnapshotStore(tmp_path_factory.mktemp("agent-store"))


@pytest.fixture(scope="session")
def agent_task(tmp_path_factory: pytest.TempPathFactory, agent_store: SnapshotStore) -> TaskRecord:
    tree = build_repo(Path(tmp_path_factory.mktemp("agent-mathlib")))
    return make_task(agent_store, tree, task_id="repo/agent-mathlib")


@pytest.fixture(scope="session")
def process_sandbox() -> Iterator[ProcessSandbox]:
    sb = ProcessSandbox()
    yield sb
    sb.close()


def judging_verifier(sandbox: Sandbox, store: SnapshotStore, task: TaskRecord) -> RepoVerifier:
    """The repo verifier on ``sandbox`` (its workspace path where the backend opens workspaces),
    checked to pass ``task``'s reference patch there: agents are judged by the real verifier."""
    verifier = RepoVerifier(sandbox, store)
    problem = reference_problem(verifier, task)
    assert problem is None, f"the repo verifier fails the reference patch: {problem}"
    return verifier


@pytest.fixture(scope="session")
def repo_verifier(
    process_sandbox: ProcessSandbox, agent_store: SnapshotStore, agent_task: TaskRecord
) -> RepoVerifier:
    return judging_verifier(process_sandbox, agent_store, agent_task)


@pytest.fixture()
def host_sandbox() -> Iterator[HostSandbox]:
    sb = HostSandbox()
    yield sb
    for ws in sb.opened:
        assert ws.closed, "an episode left its session open"


def host_opener(sb: HostSandbox, store: SnapshotStore, cfg: AgentConfig) -> Opener:
    return Opener(sb, store, cfg)


_REFERENCE_PROBLEMS: dict[int, str | None] = {}


def reference_problem(verifier: RepoVerifier, task: TaskRecord) -> str | None:
    """Why ``verifier`` does not pass ``task``'s reference patch (None: it does), once per
    verifier: tests whose subject is the agent loop need a verifier that can say pass."""
    key = id(verifier)
    if key not in _REFERENCE_PROBLEMS:
        v = verifier.verify(task, task.reference_solution or "")
        _REFERENCE_PROBLEMS[key] = (
            None
            if v.passed
            else f"the repo verifier on {verifier.sandbox.name} fails the reference patch: "
            f"{v.status}: {v.detail[:300]}"
        )
    return _REFERENCE_PROBLEMS[key]
