"""The Sandbox and Verifier interfaces every backend and task family implements."""

from __future__ import annotations

import abc
from dataclasses import dataclass, field

from schemas import TaskRecord, Verdict


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
    failed, which says nothing about the code that ran.
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


class Sandbox(abc.ABC):
    """Isolated execution of a command over a set of files in a private scratch directory."""

    name: str = "abstract"

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

    def describe(self) -> dict[str, str | bool]:
        """What isolation this sandbox gives, for the manifest."""
        return {"backend": self.name}

    def close(self) -> None:
        """Release pooled resources; the default holds none."""
        return None


class SandboxUnavailable(RuntimeError):
    """The requested sandbox cannot run here (no isolation, no engine, no image); says how."""


class UnsupportedFamily(Exception):
    """Raised when no verifier exists for a task family."""


class Verifier(abc.ABC):
    """Judges a solution for one task family; never computes the verdict inside the sandbox."""

    family: str = "abstract"

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox

    @abc.abstractmethod
    def verify(self, task: TaskRecord, solution: str) -> Verdict:
        """Run ``solution`` against ``task`` and return the verdict.

        A failing solution is a ``fail``/``error``/``timeout`` verdict; a broken environment is
        ``infra_error``. Never raises for a bad solution.
        """

    def close(self) -> None:
        """Stop any warm workers this verifier holds; the default holds none."""
        return None

    def calibrate(self, task: TaskRecord, reference_s: float) -> None:
        """Learn the reference solution's runtime measured elsewhere (e.g. on another worker).

        Verifiers whose time limits scale with the reference use it; the default ignores it.
        """
        return None

    def trivial_solutions(self, task: TaskRecord) -> list[str]:
        """Solutions that must fail for a task to be meaningful (empty, do-nothing)."""
        return [""]
