"""The Verifier interface every task family implements."""

from __future__ import annotations

import abc

from tasksieve.schemas import TaskRecord, Verdict
from tasksieve.verifiers.sandbox.base import Sandbox


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

    def verify_with_reference(
        self, task: TaskRecord, solution: str, reference_s: float | None
    ) -> Verdict:
        """``verify`` with a reference runtime that applies to this call only (None: none).

        Nothing about it is kept: a shared verifier (the sandbox service's) serves callers
        that must not change each other's limits. The default ignores ``reference_s``.
        """
        return self.verify(task, solution)

    def calibrate(self, task: TaskRecord, reference_s: float) -> None:
        """Learn the reference solution's runtime measured elsewhere (e.g. on another worker).

        Verifiers whose time limits scale with the reference use it; the default ignores it.
        """
        return None

    def trivial_solutions(self, task: TaskRecord) -> list[str]:
        """Solutions that must fail for a task to be meaningful (empty, do-nothing)."""
        return [""]
