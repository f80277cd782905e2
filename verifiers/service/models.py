"""Request bodies of the service's own endpoints (``/run_code`` keeps SandboxFusion's)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class VerifyRequest(BaseModel):
    """A task record (id, family, verifier spec, ...) and one solution to judge against it.

    ``reference_s`` is the reference solution's runtime measured elsewhere (the gates), for
    verifiers whose time limits scale with it.
    """

    model_config = ConfigDict(extra="forbid")

    task: dict[str, Any]
    solution: str
    reference_s: float | None = Field(default=None, gt=0)


class TrivialRequest(BaseModel):
    """A task whose must-fail trivial solutions are asked for."""

    model_config = ConfigDict(extra="forbid")

    task: dict[str, Any]


class SessionCreate(BaseModel):
    """Limits and lifetime of a new session (each exec gets these limits)."""

    model_config = ConfigDict(extra="forbid")

    ttl_s: float | None = Field(default=None, gt=0)
    memory_mb: int = Field(default=512, ge=16, le=16_384)
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
