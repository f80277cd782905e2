"""The candidate task record: one definition for all four task families.

A task carries its prompt, a verifier spec whose shape depends on the family, a reference
solution and source metadata. The verifier spec is a discriminated union on ``family``.
"""

from __future__ import annotations

import ast
import keyword
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from tasksieve.schemas.config_deploy import HttpDeploy, RuleTest
from tasksieve.schemas.repo import RepoSpec
from tasksieve.schemas.reward import RewardSpec
from tasksieve.schemas.strict import STRICT, JsonInt, JsonObject

SCHEMA_VERSION = "1.0"

Family = Literal["code", "sql", "api", "config", "repo"]
FeedbackLevel = Literal["none", "summary", "failing"]
"""How much of a task's tests multi-turn feedback may reveal (``tasksieve.verifiers.feedback``)."""
FAMILIES: tuple[str, ...] = ("code", "sql", "api", "config", "repo")


class _Strict(BaseModel):
    """Frozen, no unknown fields, no type coercion (see tasksieve.schemas.strict)."""

    model_config = ConfigDict(**STRICT, frozen=True)


# ---------------------------------------------------------------- code
def _plain_name(name: str) -> bool:
    """Whether ``name`` is an identifier that is neither a keyword nor a dunder."""
    return name.isidentifier() and not keyword.iskeyword(name) and not name.startswith("__")


class IOCase(_Strict):
    """One stdin/stdout case; outputs compare after normalisation (see verifiers)."""

    stdin: str = ""
    stdout: str


_DOMAIN_MAX = 20_000  # characters of author code in an input_domain field


def _defines(source: str, name: str, field: str) -> None:
    """Fail unless ``source`` parses as Python and defines function ``name`` at its top level."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError) as e:
        raise ValueError(f"input_domain.{field} is not valid Python: {e}") from None
    found = any(
        isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == name for n in tree.body
    )
    if not found:
        raise ValueError(f"input_domain.{field} must define a top-level function {name}(...)")


class InputDomain(_Strict):
    """The inputs a code task allows, stated by its author, as Python run in the sandbox.

    ``predicate`` defines ``valid(...)``, called with a call's arguments (for style ``io``:
    the stdin text) and returning True for an input inside the contract; anything else
    (False, another value, an exception, a time-out) puts it outside. ``generator`` defines
    ``generate(seed, count)`` returning a list of up to ``count`` argument lists (for style
    ``io``: not used). Both only steer the reliability checks' extra inputs; neither judges a
    solution.
    """

    predicate: str | None = Field(
        default=None,
        max_length=_DOMAIN_MAX,
        description="Python source defining valid(*args) -> bool: True for an allowed input.",
    )
    generator: str | None = Field(
        default=None,
        max_length=_DOMAIN_MAX,
        description="Python source defining generate(seed, count) -> list of argument lists.",
    )

    @model_validator(mode="after")
    def _sources(self) -> InputDomain:
        if not (self.predicate or "").strip() and not (self.generator or "").strip():
            raise ValueError("input_domain needs a predicate, a generator or both (or drop it)")
        if self.predicate is not None:
            _defines(self.predicate, "valid", "predicate")
        if self.generator is not None:
            _defines(self.generator, "generate", "generator")
        return self


class CodeSpec(_Strict):
    """Python code judged by tests.

    ``style`` selects the test form:
    - ``check``: ``test_code`` defines ``check(candidate)`` (HumanEval style), called with the
      function named ``entry_point``;
    - ``asserts``: ``asserts`` is a list of assert statements that call ``entry_point``;
    - ``pytest``: ``test_code`` defines ``test_*`` functions that call ``entry_point``;
    - ``io``: the solution is a program reading stdin; ``io_cases`` give stdin and stdout.

    In the function styles only ``entry_point`` (and any ``candidate_names``) come from the
    candidate; every other name the tests use (a helper, constant, class or import) comes from
    trusted code: the prompt when it is Python, ``reference_solution``, then ``setup_code``.
    """

    family: Literal["code"] = "code"
    style: Literal["check", "asserts", "pytest", "io"]
    entry_point: str | None = None
    test_code: str | None = None
    asserts: list[str] = Field(default_factory=list)
    io_cases: list[IOCase] = Field(default_factory=list)
    setup_code: str | None = Field(
        default=None, description="Code run before the tests (imports, helpers)."
    )
    candidate_names: list[str] = Field(
        default_factory=list,
        description="Opt-in: functions besides entry_point that the tests call as the "
        "candidate's own (the default, empty, means only entry_point). Every other name the "
        "tests use comes from trusted code (the prompt, reference_solution, setup_code), never "
        "from the candidate.",
    )
    probe_inputs: list[str] = Field(
        default_factory=list,
        description="Optional extra inputs for the reliability checks (test strength and "
        "ambiguity), never used to judge a solution: in the function styles, a call's "
        'arguments as Python literal text (e.g. "[3, 1, 2], k=2"); in style io, a whole '
        "stdin text.",
    )
    input_domain: InputDomain | None = Field(
        default=None,
        description="Optional: the inputs the task allows (a predicate and/or a generator, "
        "Python run in the sandbox), so the reliability checks probe only inside them.",
    )
    timeout_s: float = Field(default=10.0, gt=0, le=600)
    memory_mb: JsonInt = Field(default=512, ge=16, le=65536)

    @model_validator(mode="after")
    def _style_fields(self) -> CodeSpec:
        if self.style in ("check", "asserts", "pytest") and not self.entry_point:
            raise ValueError(f"style {self.style!r} needs entry_point (the function under test)")
        if self.style in ("check", "pytest") and not (self.test_code or "").strip():
            raise ValueError(f"style {self.style!r} needs test_code")
        if self.style == "asserts" and not self.asserts:
            raise ValueError("style 'asserts' needs a non-empty asserts list")
        if self.style == "io" and not self.io_cases:
            raise ValueError("style 'io' needs a non-empty io_cases list")
        if self.style == "io" and self.input_domain and self.input_domain.generator:
            raise ValueError("style 'io' takes only input_domain.predicate (on the stdin text)")
        if self.style == "io" and self.candidate_names:
            raise ValueError("style 'io' runs a program: drop candidate_names")
        bad = [n for n in self.candidate_names if not _plain_name(n)]
        if bad:
            raise ValueError(
                f"candidate_names must be plain Python names (not keywords or dunders): {bad}"
            )
        return self

    def candidate_functions(self) -> list[str]:
        """The names the tests get from the candidate: ``entry_point``, then ``candidate_names``."""
        names = [self.entry_point] if self.entry_point else []
        return list(dict.fromkeys(names + self.candidate_names))

    def test_count(self) -> int:
        """Number of tests the spec declares (a check() counts its asserts, at least 1)."""
        if self.style == "asserts":
            return len(self.asserts)
        if self.style == "io":
            return len(self.io_cases)
        code = self.test_code or ""
        if self.style == "pytest":
            return sum(1 for ln in code.splitlines() if ln.lstrip().startswith("def test"))
        return max(1, sum(1 for ln in code.splitlines() if ln.lstrip().startswith("assert")))


# ---------------------------------------------------------------- sql
class SqlCompare(_Strict):
    """How a candidate's result is compared with the expected one."""

    ordered: bool = False
    column_names: bool = False
    multiset: bool = True
    float_tol: float = Field(default=1e-6, ge=0)


class SqlSpec(_Strict):
    """A DuckDB question: setup SQL (and data files), then a reference query or expected rows."""

    family: Literal["sql"] = "sql"
    setup_sql: str
    files: dict[str, str] = Field(
        default_factory=dict, description="Data files (name -> text, e.g. CSV) beside the DB."
    )
    reference_query: str | None = None
    expected_rows: list[list[Any]] | None = None
    expected_columns: list[str] | None = None
    compare: SqlCompare = Field(default_factory=SqlCompare)
    perturb: bool = Field(default=False, description="Also compare on perturbed copies.")
    timeout_s: float = Field(default=10.0, gt=0, le=600)
    memory_mb: JsonInt = Field(default=256, ge=16, le=65536)

    @model_validator(mode="after")
    def _one_answer(self) -> SqlSpec:
        if self.reference_query is None and self.expected_rows is None:
            raise ValueError("needs reference_query or expected_rows")
        return self

    def test_count(self) -> int:
        return 1


# ---------------------------------------------------------------- api
class ApiInitialState(_Strict):
    buckets: dict[str, dict[str, str]] = Field(default_factory=dict)
    queues: list[str] = Field(default_factory=list)
    queue_messages: dict[str, list[str]] = Field(default_factory=dict)
    log_groups: list[str] = Field(default_factory=list)


class ApiExpectedState(_Strict):
    objects: dict[str, dict[str, str]] = Field(
        default_factory=dict, description="bucket -> key -> exact content"
    )
    absent_objects: dict[str, list[str]] = Field(default_factory=dict)
    queue_messages: dict[str, list[str]] = Field(default_factory=dict)
    log_events: dict[str, list[str]] = Field(
        default_factory=dict, description="log group -> messages (all streams)"
    )
    order_insensitive: bool = True


class ApiSpec(_Strict):
    """A Python program run against emulated S3/SQS/CloudWatch Logs, judged by final state."""

    family: Literal["api"] = "api"
    services: list[Literal["s3", "sqs", "logs"]] = Field(min_length=1)
    initial_state: ApiInitialState = Field(default_factory=ApiInitialState)
    expected_state: ApiExpectedState
    timeout_s: float = Field(default=30.0, gt=0, le=600)
    memory_mb: JsonInt = Field(default=512, ge=16, le=65536)

    def test_count(self) -> int:
        e = self.expected_state
        return (
            sum(len(v) for v in e.objects.values())
            + sum(len(v) for v in e.absent_objects.values())
            + len(e.queue_messages)
            + len(e.log_events)
        )


# ---------------------------------------------------------------- config
PolicyOp = Literal["exists", "absent", "equals", "not_equals", "in", "matches", "lte", "gte"]


class PolicyCheck(_Strict):
    """One policy rule: for every document matching ``kinds``, ``path`` must satisfy ``op``.

    ``path`` is dotted with ``[*]`` for every list item, e.g.
    ``spec.template.spec.containers[*].resources.limits.memory``.
    """

    id: str
    description: str = ""
    kinds: list[str] = Field(default_factory=list, description="Empty: every document.")
    path: str
    op: PolicyOp
    value: Any = None


DEPLOY_KINDS: tuple[str, ...] = ("nginx", "haproxy", "prometheus_rules")
"""Config kinds judged by trial deployment (``verifiers.families.config.deploy``)."""


class ConfigSpec(_Strict):
    """A configuration judged statically (a Kubernetes or JSON Schema, and policies) or by
    trial deployment on the real engine (``nginx``, ``haproxy``: HTTP probes through stub
    upstreams; ``prometheus_rules``: promtool rule unit tests).

    The deploy kinds take the candidate as plain text: ``format`` ``text`` for nginx (the
    contents of the ``http`` block: ``upstream``/``server``/``map`` blocks) and HAProxy (a whole
    ``haproxy.cfg``), ``yaml`` for Prometheus rule files.
    """

    family: Literal["config"] = "config"
    format: Literal["yaml", "json", "text"] = "yaml"
    schema_kind: Literal["kubernetes", "jsonschema", "nginx", "haproxy", "prometheus_rules"]
    kubernetes_version: str | None = None
    json_schema: dict[str, Any] | None = None
    policies: list[PolicyCheck] = Field(default_factory=list)
    http: HttpDeploy | None = Field(
        default=None, description="nginx/haproxy: listen port, stub upstreams and probes."
    )
    rule_tests: list[RuleTest] = Field(
        default_factory=list, description="prometheus_rules: promtool test groups, one check each."
    )
    deploy_timeout_s: float = Field(
        default=30.0, gt=0, le=300, description="Deploy kinds: wall-clock bound of one trial."
    )
    max_bytes: JsonInt = Field(default=1_000_000, gt=0)
    max_depth: JsonInt = Field(default=64, gt=0)

    @model_validator(mode="after")
    def _schema_given(self) -> ConfigSpec:
        kind = self.schema_kind
        if kind == "jsonschema" and self.json_schema is None:
            raise ValueError("schema_kind 'jsonschema' needs json_schema")
        if kind == "kubernetes" and not self.kubernetes_version:
            raise ValueError("schema_kind 'kubernetes' needs kubernetes_version, e.g. '1.29'")
        _deploy_fields(self)
        return self

    def test_count(self) -> int:
        if self.http is not None:
            return 1 + len(self.http.probes)
        if self.schema_kind == "prometheus_rules":
            return 1 + len(self.rule_tests)
        return 1 + len(self.policies)


def _deploy_fields(spec: ConfigSpec) -> None:
    """The deploy kinds' fields are given exactly where they belong."""
    kind = spec.schema_kind
    want = {"nginx": "text", "haproxy": "text", "prometheus_rules": "yaml"}.get(kind)
    if want is None:
        if spec.format == "text":
            raise ValueError(f"format 'text' is for nginx/haproxy tasks, not {kind!r}")
        if spec.http is not None or spec.rule_tests:
            raise ValueError(f"http and rule_tests are for the deploy kinds, not {kind!r}")
        return
    if spec.format != want:
        raise ValueError(f"schema_kind {kind!r} needs format {want!r}")
    if spec.policies or spec.json_schema is not None or spec.kubernetes_version:
        raise ValueError(f"schema_kind {kind!r} takes no policies, json_schema, kubernetes_version")
    if kind in ("nginx", "haproxy") and (spec.http is None or spec.rule_tests):
        raise ValueError(f"schema_kind {kind!r} needs http (probes) and no rule_tests")
    if kind == "prometheus_rules" and (spec.http is not None or not spec.rule_tests):
        raise ValueError("schema_kind 'prometheus_rules' needs rule_tests and no http")
    names = [t.name for t in spec.rule_tests]
    if len(set(names)) != len(names):
        raise ValueError(f"rule test names repeat: {names}")


VerifierSpec = Annotated[
    CodeSpec | SqlSpec | ApiSpec | ConfigSpec | RepoSpec, Field(discriminator="family")
]


class SourceInfo(_Strict):
    dataset: str = "unknown"
    license: str = "unknown"
    url: str | None = None
    author: str | None = None


class TaskRecord(_Strict):
    """One candidate task as written by a task author or a generator."""

    id: str = Field(min_length=1, max_length=256, pattern=r"^[A-Za-z0-9_.:/\-]+$")
    family: Family
    prompt: str = Field(min_length=1)
    verifier: VerifierSpec
    reference_solution: str
    source: SourceInfo = Field(default_factory=SourceInfo)
    tags: list[str] = Field(default_factory=list)
    metadata: JsonObject = Field(
        default_factory=dict,
        description="Anything else the author wants kept with the task (any JSON object); "
        "carried whole into the kept task's metadata column.",
    )
    reward: RewardSpec = Field(
        default_factory=RewardSpec,
        description="How verdicts become rewards (default: binary, 1 for pass else 0).",
    )
    feedback: FeedbackLevel | None = Field(
        default=None,
        description="Multi-turn runs: how much of the tests the feedback after a failed turn "
        "may reveal (none, summary, failing); null: the run's default. curate --feedback "
        "overrides it.",
    )

    @model_validator(mode="after")
    def _family_matches(self) -> TaskRecord:
        if self.verifier.family != self.family:
            raise ValueError(
                f"verifier.family {self.verifier.family!r} does not match family {self.family!r}"
            )
        return self
