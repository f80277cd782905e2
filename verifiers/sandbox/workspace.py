"""Workspaces: a live, copy-on-write view of a repository snapshot with a long-lived shell.

A workspace is what a repository task and a coding agent act in. The snapshot (a read-only host
directory) appears writable at ``Workspace.root`` through a copy-on-write layer, so creating one
costs no copy of the tree; every write lands in a private upper layer bounded by ``disk_mb`` and
thrown away on ``close``. No session can reach the snapshot itself (it holds the hidden tests):
the guest mounts it at ``SNAPSHOT_MOUNT`` only to build the workspace and then detaches it, and
``diff`` is computed on the host from the guest's report of what changed
(``wshostdiff``). An environment tree (the tests' dependencies, built
once per repository) is mounted read-only at ``ENV_MOUNT``. The sandbox has no network.

``exec`` runs a command in one persistent shell: its working directory, exported variables and
background processes persist between commands, as in a terminal. ``run`` starts a fresh process
(not through the shell) for a verifier that must not inherit what an agent left in the shell.
A session ends on ``close``, after ``idle_s`` without a call, or at ``lifetime_s`` after it
started, whichever comes first; every process in it is killed and its layer removed.

A backend that can open workspaces declares ``Capabilities.workspaces`` and implements
``Sandbox.open_workspace``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

WORKSPACE_ROOT = "/workspace"
SNAPSHOT_MOUNT = "/snapshot"
ENV_MOUNT = "/env"


@dataclass(frozen=True)
class SessionLimits:
    """Bounds for one workspace session as a whole and for each command in it."""

    idle_s: float = 300.0
    lifetime_s: float = 1800.0
    command_wall_s: float = 120.0
    cpu_s: float = 1800.0
    memory_mb: int = 2048
    max_processes: int = 128
    disk_mb: int = 512
    max_output_bytes: int = 1_000_000

    def __post_init__(self) -> None:
        for name in ("idle_s", "lifetime_s", "command_wall_s", "cpu_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"need {name} > 0, got {getattr(self, name)}")
        if self.memory_mb < 16 or self.max_processes < 1 or self.disk_mb < 1:
            raise ValueError("need memory_mb >= 16, max_processes >= 1 and disk_mb >= 1")


@dataclass(frozen=True)
class WorkspaceSpec:
    """What a workspace is made of: the snapshot tree, an optional environment, variables."""

    snapshot: str
    env: str | None = None
    env_vars: Mapping[str, str] = field(default_factory=dict)
    limits: SessionLimits = field(default_factory=SessionLimits)


@dataclass(frozen=True)
class CommandResult:
    """What one command did. ``ended`` is None, or why it or the session stopped it.

    ``ended`` values: ``wall`` (the command's time ran out; the shell was restarted),
    ``output`` (output over the cap, truncated), ``session`` (the session is gone: closed,
    idle, lifetime, or its shell died), ``cpu``, ``memory``, ``processes``, ``disk``.
    ``cpu_s``: user plus system seconds the session's processes used since the previous
    command returned (this command's, and any background job's meanwhile); None where it
    could not be read (a process tree too big to walk in time, a session that is gone).
    """

    exit_code: int | None
    stdout: bytes
    stderr: bytes
    duration_s: float
    ended: str | None = None
    truncated: bool = False
    cpu_s: float | None = None


class Workspace(Protocol):
    """A live copy-on-write workspace; see the module docstring."""

    @property
    def root(self) -> str: ...

    @property
    def alive(self) -> bool: ...

    def exec(self, command: str, timeout_s: float | None = None) -> CommandResult:
        """Run ``command`` in the session's persistent shell (``bash``, cwd kept)."""
        ...

    def run(
        self, argv: list[str], timeout_s: float | None = None, cwd: str = WORKSPACE_ROOT
    ) -> CommandResult:
        """Run ``argv`` as a fresh process in the workspace, outside the shell."""
        ...

    def write_file(self, path: str, data: bytes) -> None:
        """Write ``data`` at ``path`` (relative to ``root``); refuses paths leaving it."""
        ...

    def read_file(self, path: str, max_bytes: int = 1_000_000) -> bytes | None:
        """The file at ``path`` (relative to ``root``), or None when there is none."""
        ...

    def diff(self) -> str:
        """Every change against the snapshot, as a unified diff (``a/``/``b/`` paths)."""
        ...

    def close(self) -> None:
        """Kill every process of the session and remove its layer; safe to call twice."""
        ...


class WorkspaceError(RuntimeError):
    """A workspace could not be opened or used (not a fault of the code run in it)."""
