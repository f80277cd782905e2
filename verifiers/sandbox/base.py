"""The Sandbox interface: limits, what one execution did, and the capabilities a backend declares.

A family verifier asks ``sandbox.capabilities`` what a backend can do (start a process and
hand over its pipes, fork a candidate and its tests as one pair run, keep trusted scripts
warm, give every run its own pid namespace) instead of probing for methods; a backend that
declares a capability implements the matching method.
"""

from __future__ import annotations

import abc
import os
import sys
from dataclasses import dataclass, field
from typing import IO, Protocol

from tasksieve.verifiers.sandbox.pipes import Pump, Reader
from tasksieve.verifiers.sandbox.workspace import Workspace, WorkspaceSpec


@dataclass(frozen=True)
class Limits:
    """Resource limits for one execution."""

    wall_s: float = 10.0
    cpu_s: float = 10.0
    memory_mb: int = 512
    max_processes: int = 32
    max_output_bytes: int = 1_000_000
    max_file_bytes: int = 16_000_000
    scratch_mb: int = 64

    def __post_init__(self) -> None:
        if self.wall_s <= 0 or self.cpu_s <= 0:
            raise ValueError(f"need wall_s > 0 and cpu_s > 0, got {self.wall_s}, {self.cpu_s}")
        if self.memory_mb < 16:
            raise ValueError(f"need memory_mb >= 16, got {self.memory_mb}")
        if self.max_processes < 1:
            raise ValueError(f"need max_processes >= 1, got {self.max_processes}")


@dataclass(frozen=True)
class Execution:
    """What one sandboxed command did.

    ``limit_hit`` names the limit that stopped it (``wall``, ``cpu``, ``memory``, ``output``,
    ``file_size``, ``processes``) or is None. ``infra_error`` is set when the sandbox itself
    failed, which says nothing about the code that ran. ``cpu_s`` is the CPU time (user plus
    system) the run's processes used inside the sandbox, as the backend measured it; None
    where the backend could not see all of them (docs/sandbox.md says what each counts).
    """

    exit_code: int | None
    stdout: bytes
    stderr: bytes
    duration_s: float
    limit_hit: str | None = None
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    infra_error: str | None = None
    files: dict[str, bytes] = field(default_factory=dict)
    cpu_s: float | None = None


@dataclass(frozen=True)
class Capabilities:
    """What a backend can do beyond ``run``; family verifiers choose their path from this.

    - ``spawn``: ``Sandbox.spawn`` starts a command and hands its pipes to the caller (long
      lived workers, relayed sessions).
    - ``paired_runs``: ``Sandbox.spawn_pair`` forks a candidate and its tests from one per-run
      init, joined by a private pipe (one sandbox entry per verification).
    - ``warm_scripts``: scripts registered with ``verifiers.sandbox.warm`` are compiled and run
      once, and runs fork from that warm interpreter; a run of a registered script that
      defines ``warm_main`` only calls ``warm_main()`` in the script's warm namespace (the
      guest runtime ``verifiers.sandbox.guest.warmrun``, the same for every such backend).
    - ``own_pid_namespace``: every run has a pid namespace of its own, so signalling every
      process a run can see reaches only that run's processes.
    - ``private_loopback``: every run has a network namespace of its own with a loopback
      interface (a server a run starts on 127.0.0.1 is reachable only from that run).
    - ``site_packages``: where the host's Python packages appear inside the sandbox (empty
      when they are not there; guests that need e.g. boto3 put these on ``sys.path``).
    - ``whole_verifications``: the backend judges whole (task, solution) pairs itself (the
      sandbox service, ``tasksieve.verifiers.remote``): ``get_verifier`` returns its remote verifier
      instead of running a family verifier here.
    - ``workspaces``: ``Sandbox.open_workspace`` opens a live copy-on-write workspace over a
      snapshot with a persistent shell (``tasksieve.verifiers.sandbox.workspace``).
    """

    spawn: bool = False
    paired_runs: bool = False
    warm_scripts: bool = False
    own_pid_namespace: bool = False
    private_loopback: bool = False
    site_packages: tuple[str, ...] = ()
    whole_verifications: bool = False
    workspaces: bool = False


class PopenLike(Protocol):
    """The part of ``subprocess.Popen`` a spawned run exposes (pipes, poll, wait)."""

    stdin: IO[bytes] | None
    stdout: IO[bytes] | None
    stderr: IO[bytes] | None
    returncode: int | None

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...


class SpawnedRun(Protocol):
    """A started sandboxed command: its pipes, and how to kill and release it."""

    @property
    def popen(self) -> PopenLike: ...

    @property
    def started(self) -> float: ...

    @property
    def cpu_s(self) -> float | None:
        """CPU seconds the run used, once ``close()`` has returned (None: not measured)."""
        ...

    def kill(self) -> None: ...

    def close(self) -> None: ...


class PairedRun(Protocol):
    """A started pair run (``capabilities.paired_runs``): the tests' results pipe, the
    candidate's stderr, and the end of the whole run as the backend reports it."""

    @property
    def pump(self) -> Pump: ...

    @property
    def results(self) -> Reader: ...

    @property
    def stderr(self) -> Reader: ...

    @property
    def returncode(self) -> int | None: ...

    @property
    def infra_error(self) -> str | None: ...

    @property
    def cpu_s(self) -> float | None:
        """CPU seconds of the candidate and the tests together, once the end is reported."""
        ...

    def kill(self) -> None: ...

    def wait(self, timeout: float) -> int | None: ...

    def close(self, linger: bool = True) -> None: ...


def base_python() -> str:
    """The real interpreter behind ``sys.executable`` (a venv's python resolved to its base)."""
    exe = getattr(sys, "_base_executable", None) or sys.executable
    return os.path.realpath(exe)


class Sandbox(abc.ABC):
    """Isolated execution of a command over a set of files in a private scratch directory."""

    name: str = "abstract"
    capabilities: Capabilities = Capabilities()
    python: str = "python3"  # the interpreter to name in commands that run inside the sandbox

    @abc.abstractmethod
    def run(
        self,
        files: dict[str, bytes | str],
        command: list[str],
        limits: Limits,
        stdin: bytes = b"",
        collect: tuple[str, ...] = (),
    ) -> Execution:
        """Write ``files`` into a fresh scratch dir, run ``command`` there, return what it did.

        ``collect`` names scratch files to read back after the run (e.g. a results file).
        """

    def spawn(
        self,
        files: dict[str, bytes | str],
        command: list[str],
        limits: Limits,
        collect: tuple[str, ...] = (),
    ) -> SpawnedRun:
        """Start ``command`` with piped stdio and return at once (``capabilities.spawn``).

        The caller owns the result and must call ``close()``; the wall limit is the caller's.
        """
        raise CapabilityMissing(f"sandbox {self.name!r} cannot spawn (capabilities.spawn)")

    def spawn_pair(
        self,
        cand: tuple[dict[str, bytes | str], list[str]],
        tests: tuple[dict[str, bytes | str], list[str]],
        limits: Limits,
    ) -> PairedRun:
        """Start a candidate and its tests as one pair run (``capabilities.paired_runs``).

        ``cand``/``tests`` are (files, command); the tests' command gets the candidate's pid
        appended. The tests process reports on ``results``; the candidate never holds it.
        """
        raise CapabilityMissing(f"sandbox {self.name!r} has no pair runs (paired_runs)")

    def open_workspace(self, spec: WorkspaceSpec) -> Workspace:
        """Open a live workspace over ``spec.snapshot`` (``capabilities.workspaces``).

        The caller owns it and must ``close()`` it.
        """
        raise CapabilityMissing(f"sandbox {self.name!r} opens no workspaces (workspaces)")

    def dedicated(self, warm: str) -> Sandbox:
        """A sandbox like this one whose warm interpreter has also run the trusted script
        ``warm`` (``verifiers.sandbox.warm``), for a family whose runs need a heavy warm heap
        that other runs should not fork from. Runs of ``warm`` there are warm; the caller does
        not close it (this sandbox's ``close`` does). The default, for backends without their
        own warm server, is this sandbox itself: ``warm`` then runs as a plain script."""
        return self

    def describe(self) -> dict[str, str | bool]:
        """What isolation this sandbox gives, for the manifest."""
        return {"backend": self.name}

    def close(self) -> None:
        """Release pooled resources; the default holds none."""
        return None


class SandboxUnavailable(RuntimeError):
    """The requested sandbox cannot run here (no isolation, no engine, no image); says how."""


class CapabilityMissing(SandboxUnavailable):
    """A method was called that the backend does not declare in its ``capabilities``."""


def sum_cpu(parts: list[float | None]) -> float | None:
    """The CPU seconds of several runs that make one verification: their sum, or None when
    there are none or any of them was not measured (a partial sum would undercount)."""
    if not parts or any(p is None for p in parts):
        return None
    return sum(p for p in parts if p is not None)
