"""Request bodies of the service's own endpoints (``/run_code`` keeps SandboxFusion's)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class VerifyRequest(BaseModel):
    """A task and one solution to judge against it.

    The task is either a whole task record (``task``) or its id plus spec (``task_id``,
    ``verifier`` and ``reference_solution``: what the verifiers read). ``reference_s`` is the
    reference solution's runtime measured elsewhere (the gates), for verifiers whose time
    limits scale with it.
    """

    model_config = ConfigDict(extra="forbid")

    task: dict[str, Any] | None = None
    task_id: str | None = None
    verifier: dict[str, Any] | None = None
    reference_solution: str | None = None
    solution: str
    reference_s: float | None = Field(default=None, gt=0, allow_inf_nan=False)

    def task_record(self) -> dict[str, Any]:
        """The task record to validate; raises ValueError when neither form is complete."""
        if self.task is not None:
            if self.task_id or self.verifier or self.reference_solution is not None:
                raise ValueError("give either task or task_id + verifier, not both")
            return self.task
        if not self.task_id or self.verifier is None or self.reference_solution is None:
            raise ValueError("give task (a task record) or task_id, verifier, reference_solution")
        return {
            "id": self.task_id,
            "family": self.verifier.get("family"),
            "prompt": "(sent as id plus spec)",
            "verifier": self.verifier,
            "reference_solution": self.reference_solution,
        }


class TrivialRequest(BaseModel):
    """A task whose must-fail trivial solutions are asked for."""

    model_config = ConfigDict(extra="forbid")

    task: dict[str, Any]


class SessionCreate(BaseModel):
    """Limits and lifetime of a new session: idle ``ttl_s``, hard ``lifetime_s`` (live
    sessions; both bounded by the server), and the limits its processes get."""

    model_config = ConfigDict(extra="forbid")

    ttl_s: float | None = Field(default=None, gt=0)
    lifetime_s: float | None = Field(default=None, gt=0)
    memory_mb: int = Field(default=512, ge=16)  # the bound: ServiceConfig.max_memory_mb
    cpu_s: float = Field(default=60.0, gt=0, le=3600)
    max_processes: int = Field(default=32, ge=1, le=4096)


class SessionExec(BaseModel):
    """One step: a command (argv) or a snippet of code in ``language``, with a time limit."""

    model_config = ConfigDict(extra="forbid")

    command: list[str] | None = Field(default=None, min_length=1)
    code: str | None = None
    language: Literal["python", "bash"] = "python"
    stdin: str = ""
    timeout_s: float = Field(default=30.0, gt=0, le=3600)
    list_files: bool = True
    """Answer with the session's file names after the exec (``files``); false skips that."""
