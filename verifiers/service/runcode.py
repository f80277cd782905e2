"""``/run_code`` shaped like SandboxFusion's: request and response models and one run.

Languages: ``python`` (the sandbox's interpreter, ``python3`` is an alias) and ``bash``
(``sh`` runs through bash too). Files go in and out base64-encoded, as SandboxFusion does.
``status`` is ``Success`` when the program ran and exited 0, ``Failed`` when it ran and
failed (non-zero exit, a limit hit), ``SandboxError`` when the sandbox itself broke. There is
no compile step, so ``compile_result`` is always null and ``compile_timeout`` is accepted
and ignored.
"""

from __future__ import annotations

import base64
import binascii
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from tasksieve.verifiers.sandbox.base import Execution, Limits, Sandbox
from tasksieve.verifiers.sandbox.support import check_name

LANGUAGES: dict[str, tuple[str, str]] = {  # language -> (file name, interpreter or "")
    "python": ("main.py", ""),
    "python3": ("main.py", ""),
    "bash": ("main.sh", "/bin/bash"),
    "sh": ("main.sh", "/bin/bash"),
}
DEFAULT_MEMORY_MB = 512
MAX_RUN_TIMEOUT_S = 600.0


class RunCodeRequest(BaseModel):
    """SandboxFusion's run_code request (unknown fields are accepted and ignored)."""

    model_config = ConfigDict(extra="ignore")

    code: str
    language: str = "python"
    compile_timeout: float = 10.0
    run_timeout: float = Field(default=10.0, gt=0, le=MAX_RUN_TIMEOUT_S)
    memory_limit_MB: int = -1
    stdin: str | None = None
    files: dict[str, str | None] = Field(default_factory=dict)  # name -> base64 content
    fetch_files: list[str] = Field(default_factory=list)


class CommandRunResult(BaseModel):
    status: Literal["Finished", "Error", "TimeLimitExceeded"]
    execution_time: float | None = None
    return_code: int | None = None
    stdout: str | None = None
    stderr: str | None = None


class RunCodeResponse(BaseModel):
    status: Literal["Success", "Failed", "SandboxError"]
    message: str = ""
    compile_result: CommandRunResult | None = None
    run_result: CommandRunResult | None = None
    files: dict[str, str] = Field(default_factory=dict)


class BadRequest(ValueError):
    """The request names an unsupported language or carries undecodable files."""


def _decode(files: dict[str, str | None]) -> dict[str, bytes | str]:
    out: dict[str, bytes | str] = {}
    for name, data in files.items():
        try:
            out[name] = base64.b64decode(data or "", validate=True)
        except (binascii.Error, ValueError) as exc:
            raise BadRequest(f"file {name!r} is not valid base64") from exc
    return out


def plan(req: RunCodeRequest, python: str) -> tuple[dict[str, bytes | str], list[str], Limits]:
    """(files, command, limits) for one run_code request; raises ``BadRequest``."""
    if req.language not in LANGUAGES:
        raise BadRequest(
            f"language {req.language!r} is not supported here; use one of: "
            + ", ".join(sorted(LANGUAGES))
        )
    name, interpreter = LANGUAGES[req.language]
    files = _decode(req.files)
    for checked in [*files, *req.fetch_files]:
        check_name(checked)  # a ValueError: answered 400
    files[name] = req.code
    command = [interpreter or python, name]
    memory = req.memory_limit_MB if req.memory_limit_MB > 0 else DEFAULT_MEMORY_MB
    limits = Limits(wall_s=req.run_timeout, cpu_s=req.run_timeout, memory_mb=max(16, memory))
    return files, command, limits


def answer(ex: Execution) -> RunCodeResponse:
    """The SandboxFusion-shaped response for what one run did."""
    if ex.infra_error:
        return RunCodeResponse(status="SandboxError", message=ex.infra_error)
    timed_out = ex.limit_hit in ("wall", "cpu")
    run_status: Literal["Finished", "Error", "TimeLimitExceeded"] = (
        "TimeLimitExceeded" if timed_out else "Finished"
    )
    result = CommandRunResult(
        status=run_status,
        execution_time=round(ex.duration_s, 6),
        return_code=ex.exit_code,
        stdout=ex.stdout.decode("utf-8", "replace"),
        stderr=ex.stderr.decode("utf-8", "replace"),
    )
    ok = ex.exit_code == 0 and ex.limit_hit is None
    message = f"limit hit: {ex.limit_hit}" if ex.limit_hit else ""
    return RunCodeResponse(
        status="Success" if ok else "Failed",
        message=message,
        run_result=result,
        files={n: base64.b64encode(b).decode("ascii") for n, b in ex.files.items()},
    )


def run_code(sandbox: Sandbox, req: RunCodeRequest) -> RunCodeResponse:
    """Run one request in ``sandbox`` (blocking)."""
    files, command, limits = plan(req, sandbox.python)
    stdin = (req.stdin or "").encode()
    ex = sandbox.run(files, command, limits, stdin=stdin, collect=tuple(req.fetch_files))
    return answer(ex)
