"""Records the pipeline writes: verdicts, rollouts, curated tasks, rejected records, manifest."""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, Field
from pydantic.json_schema import JsonDict

from tasksieve.schemas.reward import RewardComponents, RewardSpec
from tasksieve.schemas.strict import STRICT
from tasksieve.schemas.task import SCHEMA_VERSION, TaskRecord

JSON_TEXT: JsonDict = {"contentMediaType": "application/json"}
"""Marks a string field that holds JSON text (Parquet: the JSON logical type)."""

DEFAULT_REWARD_JSON = json.dumps(
    RewardSpec().model_dump(mode="json"), sort_keys=True, separators=(",", ":")
)
"""The default reward spec (binary) as canonical JSON text."""

VerdictStatus = Literal["pass", "fail", "timeout", "error", "infra_error"]
Difficulty = Literal["too_easy", "keep", "too_hard"]


class _Rec(BaseModel):
    """No unknown fields, no type coercion (see tasksieve.schemas.strict)."""

    model_config = STRICT


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
    cpu_s: float | None = Field(
        default=None,
        description="CPU seconds (user plus system) the verification's processes used inside "
        "the sandbox: the candidate's and the tests', summed over the runs it took; null where "
        "the backend could not measure every part (see docs/sandbox.md).",
    )
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
    """One sampled completion for one task, with its verdict.

    The fields after ``run_id`` say how the completion was drawn; a sampler fills what it
    knows (replay: none of them) and leaves the rest null.
    """

    task_id: str
    family: str
    sample_index: int
    model_id: str
    sampler: str
    completion: str
    solution: str
    verdict: Verdict
    run_id: str
    reward: float | None = Field(
        default=None,
        description="The verdict scored by the task's reward spec; null for an infra_error "
        "(no reward: the verdict says nothing about the solution).",
    )
    reward_components: RewardComponents | None = None
    prompt_hash: str | None = Field(
        default=None,
        description="sha256 of the chat messages sent, as canonical JSON (model-independent).",
    )
    turn: int = Field(default=1, description="Turn of the episode (1: the first attempt).")
    feedback: str | None = Field(
        default=None,
        description="Multi-turn runs: the feedback message on the previous turn's verdict that "
        "preceded this attempt (null on turn 1). The rows of one episode share sample_index.",
    )
    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = Field(
        default=None, description="Seed of the request (samples of one request share it)."
    )
    max_tokens: int | None = Field(default=None, description="Completion token limit asked.")
    prompt_tokens: int | None = None
    completion_tokens: int | None = Field(
        default=None,
        description="Tokens generated (null where the server reports only a request total).",
    )
    finish_reason: str | None = Field(
        default=None, description="Why generation stopped: stop, length, ... (the server's)."
    )
    latency_s: float | None = Field(
        default=None, description="Wall time of the request (transformers: of its batch)."
    )


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


class SurvivingMutant(_Rec):
    """A change to the reference the task's tests let through, with an input that shows it."""

    operator: str = Field(description="Mutation operator, e.g. py.compare_boundary.")
    where: str = Field(description="Where it applied, e.g. 'line 4: < to <='.")
    diff: str = Field(description="Unified diff from the reference to the mutant (shortened).")
    probe: str = Field(description="An input the tests do not contain, e.g. f([1, 2], 0).")
    reference_output: str
    mutant_output: str


class StrengthCheck(_Rec):
    """Test strength by mutation: mutants made, killed by the tests, surviving, equivalent.

    ``score`` = killed / (killed + survived); null when no mutant was decided either way.
    ``undecided``: mutants whose verification hit an infra error twice (in no count above);
    ``unprobed``: mutants the tests let through that no valid extra input could compare.
    """

    made: int
    killed: int
    survived: int
    equivalent: int
    undecided: int = 0
    unprobed: int = 0
    score: float | None = None
    probes: int = Field(default=0, description="Extra inputs tried on the surviving mutants.")
    duration_s: float = 0.0
    survivors: list[SurvivingMutant] = Field(default_factory=list)


class AmbiguityCheck(_Rec):
    """Differential testing of the passing samples against the reference on extra inputs.

    ``probes_valid``: inputs on which the reference did not fail; ``probes_agreed``: valid
    inputs on which every passing sample gave the reference's answer.
    """

    probes_tried: int
    probes_valid: int
    probes_agreed: int
    solutions: int = Field(description="Passing samples compared (the reference's twins too).")
    duration_s: float = 0.0
    outcome: str = Field(
        default="unambiguous",
        description="unambiguous, or not_enough_evidence: too few distinct passing samples "
        "or valid inputs to test agreement (the task is kept either way).",
    )
    distinct: int = Field(default=0, description="Distinct passing samples besides the reference.")
    probes_dropped: int = Field(
        default=0, description="Candidate inputs left out as outside the task's contract."
    )


class Lineage(_Rec):
    source_file: str
    source_line: int
    input_sha256: str
    run_id: str
    config_fingerprint: str


class CuratedTask(_Rec):
    """A kept task with its measured difficulty, and every field of the input task, whole.

    ``task_record()`` gives back a TaskRecord equal to the one that was read in.
    """

    id: str
    family: str
    prompt: str
    verifier: str = Field(
        description="The verifier spec as canonical JSON text.", json_schema_extra=JSON_TEXT
    )
    reference_solution: str
    source_dataset: str
    source_license: str
    source_url: str | None = None
    source_author: str | None = None
    tags: list[str] = Field(default_factory=list)
    metadata: str = Field(
        default="{}",
        description="The task's metadata object as canonical JSON text (sorted keys).",
        json_schema_extra=JSON_TEXT,
    )
    reward: str = Field(
        default=DEFAULT_REWARD_JSON,
        description="The task's reward spec as canonical JSON text.",
        json_schema_extra=JSON_TEXT,
    )
    feedback: str | None = Field(
        default=None, description="The task's own multi-turn feedback level (null: none set)."
    )
    n: int = Field(description="Samples obtained and verified (k of n passed).")
    k: int
    n_requested: int = Field(
        description="Samples asked of the sampler (K); n < n_requested when it returned fewer."
    )
    pass_rate: float
    pass_rate_by_turn: list[float] | None = Field(
        default=None,
        description="Multi-turn runs: share of the n episodes passed by turn 1, 2, .. T "
        "(cumulative); pass_rate is the entry of the run's band turn. Null for one-turn runs.",
    )
    k_by_turn: list[int] | None = Field(
        default=None, description="Multi-turn runs: episodes passed by turn 1, 2, .. T."
    )
    episode_steps: list[int] | None = Field(
        default=None,
        description="Agent runs (--agent): the number of steps of each of the task's episodes, "
        "in episode order (the pass rate is the share of episodes the verifier passed).",
    )
    ci_low: float
    ci_high: float
    difficulty: Difficulty
    gates: list[GateResult] = Field(default_factory=list)
    findings: list[Finding] = Field(default_factory=list)
    test_strength: StrengthCheck | None = Field(
        default=None, description="Mutation testing of the task's tests (null: not measured)."
    )
    ambiguity: AmbiguityCheck | None = Field(
        default=None, description="Differential testing of passing samples (null: not run)."
    )
    lineage: Lineage
    schema_version: str = SCHEMA_VERSION

    def task_record(self) -> TaskRecord:
        """The input task this row was made from (raises ValidationError if the row was edited)."""
        return TaskRecord.model_validate(
            {
                "id": self.id,
                "family": self.family,
                "prompt": self.prompt,
                "verifier": json.loads(self.verifier),
                "reference_solution": self.reference_solution,
                "source": {
                    "dataset": self.source_dataset,
                    "license": self.source_license,
                    "url": self.source_url,
                    "author": self.source_author,
                },
                "tags": self.tags,
                "metadata": json.loads(self.metadata),
                "reward": json.loads(self.reward),
                "feedback": self.feedback,
            }
        )


class TrajectoryStep(_Rec):
    """One step of an agent episode: the action, what it showed, and how the episode ended.

    The rows of one episode share ``task_id`` and ``episode`` and are numbered by ``step``
    from 1; the episode's ending, verdict and reward repeat on each of its rows.
    """

    task_id: str
    family: str
    episode: int = Field(description="The episode's index among the task's K episodes.")
    step: int
    action_kind: str = Field(description="run, view, replace, submit or invalid.")
    action: str = Field(description="The command, or the tool call as text.")
    reply: str = Field(description="The model's reply as sent (text protocol) or its text.")
    observation: str = Field(description="What the agent saw, cut by the truncation rule.")
    observation_truncated: bool
    exit_code: int | None = None
    ended: str | None = Field(
        default=None, description="Why the command or its session stopped (wall, session, ..)."
    )
    duration_s: float = Field(description="Wall time of the action in the sandbox.")
    cpu_s: float | None = Field(
        default=None,
        description="User plus system seconds the session's processes used since the previous "
        "command (this command's, and background jobs' meanwhile); null for steps that ran no "
        "command and where it could not be read.",
    )
    tokens_in: int | None = Field(default=None, description="Prompt tokens of the step's reply.")
    tokens_out: int | None = Field(default=None, description="Tokens of the step's reply.")
    episode_steps: int
    episode_ending: str = Field(
        description="submitted, max_steps, max_tokens, wall, protocol_errors, session_lost, "
        "no_session or policy_error."
    )
    episode_wall_s: float
    verdict_status: str
    verdict_detail: str = ""
    tests_passed: int = 0
    tests_total: int = 0
    reward: float | None = Field(
        default=None, description="The episode's reward from its verdict (null: infra_error)."
    )
    model_id: str
    run_id: str


class RejectedRecord(_Rec):
    """A record that did not make it, with where it came from and why."""

    record_id: str | None
    family: str | None = None
    stage: str
    reason: str = Field(description="Stable reason code, e.g. gate.reference_failed.")
    detail: str = ""
    source_file: str
    source_line: int
    raw: str = Field(
        default="",
        description="The input record as text, whole: for JSON and JSONL input the record's "
        "exact text, for Parquet/Arrow input its row as JSON.",
    )
    run_id: str
    n: int | None = None
    k: int | None = None
    n_requested: int | None = None
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
    counts: dict[str, int] = Field(
        description="input, kept, rejected, rollouts; short_samples (scored tasks that got "
        "fewer samples than asked) and short_samples_kept (those of them kept)"
    )
    rejected_by_reason: dict[str, int]
    stage_counters: dict[str, int]
    pass_rate_histogram: dict[str, int]
    outputs: dict[str, list[str]]
    runner: dict[str, str] = Field(
        default_factory=dict,
        description="the Beam runner; counters: committed or attempted (runners that report "
        "no committed values); conservation: exact, or why it could not be checked exactly",
    )
