"""Records the pipeline writes: verdicts, rollouts, curated tasks, rejected records, manifest."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from schemas.task import SCHEMA_VERSION

VerdictStatus = Literal["pass", "fail", "timeout", "error", "infra_error"]
Difficulty = Literal["too_easy", "keep", "too_hard"]


class _Rec(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CheckResult(_Rec):
    """One test or check inside a verdict."""

    name: str
    passed: bool
    detail: str = ""


class Verdict(_Rec):
    """The outcome of running one solution against one task.

    ``fail`` is a wrong solution; ``error`` a solution that crashed or did not load;
    ``timeout`` a solution over its time limit; ``infra_error`` a broken environment
    (sandbox or harness), which says nothing about the solution.
    """

    status: VerdictStatus
    tests_passed: int = 0
    tests_total: int = 0
    detail: str = ""
    checks: list[CheckResult] = Field(default_factory=list)
    duration_s: float = 0.0
    limit_hit: str | None = None
    trace: list[str] = Field(
        default_factory=list,
        description="What the solution did, in order, where the family records it "
        "(API workflows: one 'service.Operation path status' entry per call).",
    )

    @property
    def passed(self) -> bool:
        return self.status == "pass"


class Rollout(_Rec):
    """One sampled completion for one task, with its verdict."""

    task_id: str
    family: str
    sample_index: int
    model_id: str
    sampler: str
    completion: str
    solution: str
    verdict: Verdict
    run_id: str


class GateResult(_Rec):
    gate: str
    passed: bool
    detail: str = ""
    duration_s: float = Field(default=0.0, description="Slowest run of the gate (seconds).")


class Finding(_Rec):
    """A dedup or contamination finding attached to a task."""

    kind: Literal["exact_dup", "near_dup", "contamination"]
    other_id: str
    source: str = Field(default="input", description="input, index or a benchmark name")
    method: str = ""
    score: float = 0.0


class Lineage(_Rec):
    source_file: str
    source_line: int
    input_sha256: str
    run_id: str
    config_fingerprint: str


class CuratedTask(_Rec):
    """A kept task with its measured difficulty."""

    id: str
    family: str
    prompt: str
    verifier: str = Field(description="The verifier spec as JSON text.")
    reference_solution: str
    source_dataset: str
    source_license: str
    tags: list[str] = Field(default_factory=list)
    n: int
    k: int
    pass_rate: float
    ci_low: float
    ci_high: float
    difficulty: Difficulty
    gates: list[GateResult] = Field(default_factory=list)
    findings: list[Finding] = Field(default_factory=list)
    lineage: Lineage
    schema_version: str = SCHEMA_VERSION


class RejectedRecord(_Rec):
    """A record that did not make it, with where it came from and why."""

    record_id: str | None
    family: str | None = None
    stage: str
    reason: str = Field(description="Stable reason code, e.g. gate.reference_failed.")
    detail: str = ""
    source_file: str
    source_line: int
    raw: str = Field(default="", description="The input record as text (truncated).")
    run_id: str
    n: int | None = None
    k: int | None = None
    pass_rate: float | None = None


class Manifest(_Rec):
    """What a run read, did and wrote; written last, so its presence marks a complete run."""

    schema_version: str = SCHEMA_VERSION
    run_id: str
    created_at: str
    finished_at: str
    config: dict[str, Any]
    config_fingerprint: str
    packages: dict[str, str]
    model_id: str
    sampler: str
    sandbox: dict[str, Any]
    inputs: list[str]
    counts: dict[str, int] = Field(description="input, kept, rejected, rollouts")
    rejected_by_reason: dict[str, int]
    stage_counters: dict[str, int]
    pass_rate_histogram: dict[str, int]
    outputs: dict[str, list[str]]
