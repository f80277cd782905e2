"""Opening an agent's workspace for a repo task, with the hidden tests taken out of its view.

Hidden-test rule (``AgentConfig.hidden``), the same for synthesized and imported tasks:
``fail_to_pass_files`` (the default) deletes from the agent's workspace, before its first
step, every file that holds a ``fail_to_pass`` test (the path before ``::`` of each id). For an
imported SWE-bench-style task those are the files of the test patch the agent is not meant to
see; for a synthesized task (a bug injected into a package whose suite passed) they are the
package's own tests that the bug breaks, and seeing them would hand the agent the check. Files
that hold only ``pass_to_pass`` tests stay, so the agent can run the regression suite. The
verifier judges the final workspace in a fresh session with every test file restored from the
snapshot, so deleting, editing or adding tests changes nothing in the verdict. ``none`` hides
nothing (for agents evaluated with the tests in view).

The snapshot itself (the workspace's lower layer, which still holds the deleted files) is out
of every session's reach on both backends (docs/repo-tasks.md, "Workspace isolation"). What it
does NOT hide: tests or fixtures that an environment tree (``/env``) built from the package
itself might carry.
"""

from __future__ import annotations

import os
import shlex
import threading
from typing import Protocol

from tasksieve.schemas import TaskRecord, Verdict
from tasksieve.schemas.repo import RepoSpec
from tasksieve.transforms.agent.config import AgentConfig, Hidden
from tasksieve.verifiers.families.repo.environments import (
    EnvironmentBuildError,
    ResolvedEnv,
    resolve,
)
from tasksieve.verifiers.families.repo.snapshots import SnapshotError, SnapshotStore
from tasksieve.verifiers.sandbox.base import Sandbox
from tasksieve.verifiers.sandbox.workspace import (
    ENV_MOUNT,
    SessionLimits,
    Workspace,
    WorkspaceError,
    WorkspaceSpec,
)

SYSTEM_PATH = ("/usr/local/bin", "/usr/bin", "/bin")


class SessionProblem(Exception):
    """No workspace could be opened for a task (snapshot, environment or backend); says why."""


class WorkspaceVerifier(Protocol):
    """What the agent needs of the repo family's verifier."""

    store: SnapshotStore | None

    def verify_workspace(self, task: TaskRecord, ws: Workspace) -> Verdict: ...


def hidden_paths(spec: RepoSpec, rule: Hidden) -> list[str]:
    """The repository paths taken out of the agent's view under ``rule`` (sorted, unique)."""
    if rule == "none":
        return []
    return sorted({tid.split("::", 1)[0] for tid in spec.fail_to_pass})


def repo_spec(task: TaskRecord) -> RepoSpec:
    """The task's repo spec; ``SessionProblem`` for any other family."""
    if not isinstance(task.verifier, RepoSpec):
        raise SessionProblem(f"task {task.id}: agent episodes need a repo task, not {task.family}")
    return task.verifier


def agent_path(sandbox: Sandbox, env: ResolvedEnv) -> str:
    """The shell's PATH: the environment's ``bin`` (when mounted), the directory of the
    sandbox's Python (so ``python`` and ``python3`` are the one the tests run with), then the
    system's."""
    first = [f"{ENV_MOUNT}/bin"] if env.tree is not None else []
    pydir = os.path.dirname(sandbox.python)
    return ":".join([*first, *([pydir] if pydir else []), *SYSTEM_PATH])


class Opener:
    """Opens agent workspaces over one sandbox and the repo verifier's snapshot store."""

    def __init__(self, sandbox: Sandbox, store: SnapshotStore | None, cfg: AgentConfig) -> None:
        self.sandbox, self.store, self.cfg = sandbox, store, cfg
        self._envs: dict[str, ResolvedEnv] = {}
        self._lock = threading.Lock()

    def _env(self, task: TaskRecord, spec: RepoSpec, store: SnapshotStore) -> ResolvedEnv:
        key = spec.environment.model_dump_json()
        with self._lock:  # an environment is built once per worker
            env = self._envs.get(key)
            if env is None:
                try:
                    site = self.sandbox.capabilities.site_packages
                    env = resolve(spec.environment, store.root, site)
                except EnvironmentBuildError as exc:
                    raise SessionProblem(f"task {task.id}: environment failed: {exc}") from exc
                self._envs[key] = env
            return env

    def spec(self, task: TaskRecord) -> WorkspaceSpec:
        """The workspace the agent gets for ``task``: its snapshot, environment and limits."""
        spec = repo_spec(task)
        if not self.sandbox.capabilities.workspaces:
            raise SessionProblem(
                f"sandbox {self.sandbox.name!r} opens no workspaces; agent episodes need a "
                "backend with live workspaces (capabilities.workspaces)"
            )
        if self.store is None:
            raise SessionProblem(
                f"task {task.id}: no snapshot store "
                "(--snapshot-store DIR or $TASKSIEVE_SNAPSHOT_STORE)"
            )
        try:
            tree = self.store.path(spec.snapshot)
        except SnapshotError as exc:
            raise SessionProblem(f"task {task.id}: {exc}") from exc
        env = self._env(task, spec, self.store)
        cfg = self.cfg
        limits = SessionLimits(
            idle_s=cfg.wall_s + 60,  # the model's think time counts as idle
            lifetime_s=cfg.wall_s + 120,
            command_wall_s=cfg.command_timeout_s,
            cpu_s=cfg.wall_s,
            memory_mb=spec.memory_mb,
            max_processes=cfg.max_processes,
            disk_mb=spec.disk_mb,
            max_output_bytes=max(1_000_000, cfg.observation_bytes),
        )
        env_vars = {"PYTHONDONTWRITEBYTECODE": "1", "PATH": agent_path(self.sandbox, env)}
        if env.tree is None:  # the sandbox's own packages; a mounted tree the backend sets up
            env_vars["PYTHONPATH"] = ":".join(env.paths)
        return WorkspaceSpec(
            snapshot=str(tree),
            env=str(env.tree) if env.tree is not None else None,
            env_vars=env_vars,
            limits=limits,
        )

    def open(self, task: TaskRecord) -> Workspace:
        """A live workspace for ``task`` with its hidden tests removed; the caller closes it."""
        ws_spec = self.spec(task)
        try:
            ws = self.sandbox.open_workspace(ws_spec)
        except WorkspaceError as exc:
            raise SessionProblem(f"task {task.id}: workspace failed to open: {exc}") from exc
        hide = hidden_paths(repo_spec(task), self.cfg.hidden)
        if not hide:
            return ws
        # In the session's fresh shell (it starts in the workspace root), which the first step
        # needs anyway: a fresh process beside it would fork the guest agent, a larger process
        # than the shell (docs/benchmarks/agent-episodes.md, "Where a step's CPU goes").
        command = shlex.join(["rm", "-f", "--", *hide])
        try:
            res = ws.exec(command, timeout_s=60)
        except WorkspaceError as exc:
            ws.close()
            raise SessionProblem(f"task {task.id}: hiding tests failed: {exc}") from exc
        if res.exit_code != 0:
            ws.close()
            why = (res.stderr.decode("utf-8", "replace") or f"ended: {res.ended}")[-300:]
            raise SessionProblem(f"task {task.id}: hiding tests failed: {why}")
        return ws
