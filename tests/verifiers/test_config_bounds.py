"""The config verifier always returns a verdict: hostile regexes and YAML cannot hang a worker.

Each call runs under ``returns_within``, a safety net that only keeps a hung call from hanging
the test run (it never asserts a speed). It uses SIGALRM rather than a thread join: Python's
``re`` holds the GIL inside its C matching loop, so a joining thread could not resume until a
catastrophic match ended, while ``re`` does check for signals as it backtracks.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tasksieve.schemas import PolicyCheck, TaskRecord
from tasksieve.transforms.reliability.gates import GatesConfig, run_gates
from tasksieve.transforms.runtime.items import Item
from tasksieve.verifiers.families.config import policies
from tasksieve.verifiers.families.config.regex import RegexRejected, compile_task_regex, search
from tasksieve.verifiers.families.config.verifier import ConfigLimits, ConfigVerifier
from tasksieve.verifiers.families.config.workers import WorkerFailed, WorkerPool, WorkerTimeout
from tests.verifiers.test_config import NoSandbox

T = TypeVar("T")
SAFETY_S = 240  # generous: a call that has not returned by then is hung


class Hung(BaseException):
    """Raised in the test when a call has not returned within the safety limit."""


def returns_within(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)``, or Hung if it has not returned after SAFETY_S seconds."""

    def alarm(signum: int, frame: Any) -> None:
        raise Hung(f"no verdict after {SAFETY_S} s")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, SAFETY_S)
    try:
        return fn(*args)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture(scope="module")
def verifier() -> Iterator[ConfigVerifier]:
    """A verifier whose bound is far above any input here: verdicts do not depend on speed."""
    v = ConfigVerifier(NoSandbox(), ConfigLimits(timeout_s=180, max_workers=2))
    yield v
    v.close()


def config_task(
    schema: dict[str, Any] | None = None,
    rules: list[dict[str, Any]] | None = None,
    fmt: str = "yaml",
    reference: str = "",
) -> TaskRecord:
    return TaskRecord(
        id="t.bounds",
        family="config",
        prompt="write a config",
        reference_solution=reference,
        verifier={
            "family": "config",
            "format": fmt,
            "schema_kind": "jsonschema",
            "json_schema": schema if schema is not None else {"type": "object"},
            "policies": rules or [],
        },
    )


# ------------------------------------------------------------------ catastrophic task regexes
EVIL = {  # case -> (regex, value that makes a backtracking engine explode, value that matches)
    "nested_plus": (r"^(a+)+$", "a" * 64 + "!", "a" * 64),
    "alternation_star": (r"^(a|a)*$", "a" * 64 + "!", "aaa"),
    "overlapping_alternatives": (r"^(a|aa)+$", "a" * 100 + "!", "a" * 100),
    "words": (r"^(\w+\s?)*$", "a" * 64 + "!", "some words here"),
    "email_like": (
        r"^([a-z0-9]+[._-]?)*[a-z0-9]+@[a-z0-9]+\.[a-z]{2,3}$",
        "a" * 64 + "@",
        "first.last@example.com",
    ),
}


@pytest.mark.parametrize("case", sorted(EVIL))
def test_catastrophic_regex_is_linear_in_policies(case: str) -> None:
    regex, hostile, matching = EVIL[case]
    rule = PolicyCheck(id="evil", op="matches", path="name", value=regex)
    assert not returns_within(policies.evaluate, rule, [{"name": hostile}]).passed
    assert returns_within(policies.evaluate, rule, [{"name": matching}]).passed


@pytest.mark.parametrize("case", sorted(EVIL))
def test_catastrophic_policy_regex_gives_a_fail_verdict(
    case: str, verifier: ConfigVerifier
) -> None:
    regex, hostile, _ = EVIL[case]
    task = config_task(rules=[{"id": "evil", "op": "matches", "path": "name", "value": regex}])
    verdict = returns_within(verifier.verify, task, f"name: '{hostile}'\n")
    assert verdict.status == "fail", verdict.detail
    assert [c.name for c in verdict.checks if not c.passed] == ["policy:evil"]


@pytest.mark.parametrize("case", sorted(EVIL))
def test_catastrophic_schema_pattern_gives_a_fail_verdict(
    case: str, verifier: ConfigVerifier
) -> None:
    regex, hostile, matching = EVIL[case]
    task = config_task({"properties": {"name": {"type": "string", "pattern": regex}}})
    verdict = returns_within(verifier.verify, task, f"name: '{hostile}'\n")
    assert verdict.status == "fail", verdict.detail
    assert "does not match" in verdict.checks[1].detail
    assert returns_within(verifier.verify, task, f"name: '{matching}'\n").passed


@pytest.mark.parametrize("case", sorted(EVIL))
@pytest.mark.parametrize(
    "where", ["patternProperties", "propertyNames", "definitions_via_ref", "additional"]
)
def test_catastrophic_regex_on_keys_gives_a_fail_verdict(
    case: str, where: str, verifier: ConfigVerifier
) -> None:
    regex, hostile, _ = EVIL[case]
    schema: dict[str, Any] = {
        "patternProperties": {
            "patternProperties": {regex: {"type": "integer"}},
            "additionalProperties": False,
        },
        "propertyNames": {"propertyNames": {"pattern": regex}},
        "definitions_via_ref": {
            "$defs": {"key": {"pattern": regex}},
            "propertyNames": {"$ref": "#/$defs/key"},
        },
        "additional": {
            "patternProperties": {regex: True},
            "additionalProperties": {"type": "integer"},
        },
    }[where]
    verdict = returns_within(verifier.verify, config_task(schema), f"'{hostile}': x\n")
    assert verdict.status == "fail", verdict.detail


def test_surrogates_in_candidate_text_are_matched() -> None:
    assert search("^a.c$", "a\ud800c")
    assert not search("^(a+)+$", "a" * 64 + "\ud800")


# ------------------------------------------------------------------ regexes RE2 cannot run
UNSUPPORTED = {
    "lookahead": r"^(?=.*\d).+$",
    "negative_lookahead": r"^(?!root$).+$",
    "lookbehind": r"(?<=v)\d+",
    "backreference": r"^(\w+)-\1$",
    "named_backreference": r"^(?P<x>a)(?P=x)$",
    "possessive": r"^a++$",
    "atomic_group": r"^(?>a+)$",
    "end_of_string_z": r"^a\Z",
}


@pytest.mark.parametrize("case", sorted(UNSUPPORTED))
def test_unsupported_regex_is_rejected(case: str) -> None:
    with pytest.raises(RegexRejected, match="not supported"):
        compile_task_regex(UNSUPPORTED[case])


@pytest.mark.parametrize("case", sorted(UNSUPPORTED))
def test_unsupported_policy_regex_is_a_task_error_naming_the_policy(
    case: str, verifier: ConfigVerifier
) -> None:
    task = config_task(
        rules=[{"id": "needs-re2", "op": "matches", "path": "a", "value": UNSUPPORTED[case]}]
    )
    verdict = returns_within(verifier.verify, task, "a: x\n")
    assert verdict.status == "error"
    assert verdict.detail.startswith("task: policy 'needs-re2': matches needs a valid regex")


@pytest.mark.parametrize("case", sorted(UNSUPPORTED))
def test_unsupported_schema_regex_is_a_task_error_naming_its_place(
    case: str, verifier: ConfigVerifier
) -> None:
    schema = {"properties": {"a": {"type": "string", "pattern": UNSUPPORTED[case]}}}
    verdict = returns_within(verifier.verify, config_task(schema), "b: x\n")
    assert verdict.status == "error"
    assert verdict.detail.startswith("task: json_schema #/properties/a/pattern: regex")


def test_unsupported_regex_fails_the_reference_gate_with_the_policy_named(
    verifier: ConfigVerifier,
) -> None:
    task = config_task(
        rules=[{"id": "tag", "op": "matches", "path": "a", "value": r"^(?!latest$)"}],
        reference="a: v1\n",
    )
    item = Item(task=task, source_file="t.jsonl", source_line=1, input_sha256="0" * 64)
    results, reason = returns_within(run_gates, item, verifier, GatesConfig(reference_runs=1))
    assert reason == "gate.reference_failed"
    assert "policy 'tag'" in results[-1].detail


def test_unevaluated_properties_with_pattern_properties_is_a_task_error(
    verifier: ConfigVerifier,
) -> None:
    schema = {"patternProperties": {"^x-": True}, "unevaluatedProperties": False}
    verdict = returns_within(verifier.verify, config_task(schema), "x-a: 1\n")
    assert verdict.status == "error"
    assert "unevaluatedProperties" in verdict.detail


def test_pattern_properties_still_judge_keys(verifier: ConfigVerifier) -> None:
    schema = {"patternProperties": {"^x-": {"type": "integer"}}, "additionalProperties": False}
    task = config_task(schema)
    assert returns_within(verifier.verify, task, "x-a: 1\n").passed
    assert returns_within(verifier.verify, task, "x-a: one\n").status == "fail"
    extra = returns_within(verifier.verify, task, "y: 1\n")
    assert extra.status == "fail" and "'y'" in extra.detail


# ------------------------------------------------------------------ hostile YAML, in the workers
N = 900_000  # under the default max_bytes (1,000,000)
LAUGHS = "a: &a [x,x,x,x,x,x,x,x,x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{','.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(8)
)
HOSTILE = {  # case -> (text, status, what the detail names)
    "deep_flow": ("[" * (N // 2) + "]" * (N // 2), "error", "nesting"),
    "deep_flow_mappings": ("{a: " * (N // 4), "error", "nesting"),
    "huge_plain_scalar": ("a: " + "x" * (N - 3), "fail", "maxLength"),
    "huge_quoted_scalar": ('a: "' + "\\x41" * (N // 4) + '"', "fail", "maxLength"),
    "over_the_byte_cap": ("a: " + "x" * 2_000_000, "error", "max_bytes"),
    "alias_bomb": (LAUGHS, "error", "nodes once aliases are expanded"),
    "plain_scalar_of_colons": ("a: " + "x: " * (N // 3), "error", "mapping values"),
    "plain_scalar_of_hashes": ("a: " + "x#" * (N // 2), "fail", "maxLength"),
    "comment_after_scalar": ("a: x #" + "y #" * (N // 3), "pass", "checks passed"),
    "multiline_plain_scalar": ("a: " + "x\n  " * (N // 4), "fail", "maxLength"),
    "long_simple_key": ("a " * (N // 2) + ": x", "error", "mapping values"),
}
SLOW_HOSTILE = {  # the parser's slowest shapes: each stops at the 100,000-node cap
    "many_documents": ("a: 1\n---\n" * (N // 9), "error", "nodes"),
    "many_empty_documents": ("---\n" * (N // 4), "error", "nodes"),
    "long_flow_sequence": ("[" + "1," * (N // 2) + "1]", "error", "nodes"),
}
SCHEMA = {"type": "object", "additionalProperties": {"maxLength": 1000}}


def _check_hostile(verifier: ConfigVerifier, text: str, status: str, named: str) -> None:
    verdict = returns_within(verifier.verify, config_task(SCHEMA), text)
    assert verdict.status == status, verdict.detail
    assert named in verdict.detail


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_yaml_gets_a_verdict(case: str, verifier: ConfigVerifier) -> None:
    _check_hostile(verifier, *HOSTILE[case])


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(SLOW_HOSTILE))
def test_slow_yaml_shapes_get_a_verdict(case: str, verifier: ConfigVerifier) -> None:
    _check_hostile(verifier, *SLOW_HOSTILE[case])


# ------------------------------------------------------------------ the wall-clock bound
def _judge_request(text: str) -> dict[str, Any]:
    return {"op": "judge", "spec": config_task(SCHEMA).verifier.model_dump_json(), "solution": text}


def test_overrun_is_a_timeout_verdict() -> None:
    tight = ConfigVerifier(NoSandbox(), ConfigLimits(timeout_s=0.05, max_workers=1))
    try:
        text = SLOW_HOSTILE["many_empty_documents"][0]  # 100,000 nodes: far beyond 0.05 s
        verdict = returns_within(tight.verify, config_task(SCHEMA), text)
    finally:
        tight.close()
    assert verdict.status == "timeout"
    assert verdict.limit_hit == "wall"


def test_overrunning_worker_is_killed_and_replaced(verifier: ConfigVerifier) -> None:
    pool = verifier.pool
    returns_within(pool.call, _judge_request("a: 1\n"), 60)
    before = pool.idle_pids()
    with pytest.raises(WorkerTimeout):
        returns_within(pool.call, _judge_request(SLOW_HOSTILE["many_empty_documents"][0]), 0.05)
    killed = set(before) - set(pool.idle_pids())
    assert len(killed) == 1
    for pid in killed:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)  # gone and reaped
    answer = returns_within(pool.call, _judge_request("a: 1\n"), 60)
    assert answer["ok"] and answer["verdict"]["status"] == "pass"


def _wait_until_exited(pid: int) -> None:
    """Return once ``pid`` is a zombie or gone (Linux ``/proc``; a kill is not instant)."""
    stat = Path(f"/proc/{pid}/stat")
    while stat.exists():
        with contextlib.suppress(OSError):
            if stat.read_text().rsplit(")", 1)[-1].split()[0] in ("Z", "X"):
                return
        time.sleep(0.01)


def test_worker_that_died_while_idle_is_replaced_silently() -> None:
    v = ConfigVerifier(NoSandbox(), ConfigLimits(max_workers=1))
    try:
        task = config_task(SCHEMA)
        assert returns_within(v.verify, task, "a: 1\n").passed
        (pid,) = v.pool.idle_pids()
        os.kill(pid, signal.SIGKILL)
        returns_within(_wait_until_exited, pid)
        assert returns_within(v.verify, task, "a: 1\n").passed
        assert v.pool.idle_pids() != [pid]
    finally:
        v.close()


def test_worker_that_dies_during_a_call_is_an_infra_error() -> None:
    v = ConfigVerifier(NoSandbox(), ConfigLimits(timeout_s=180, max_workers=1))
    task = config_task(SCHEMA)
    verdicts: list[str] = []
    slow = threading.Thread(
        target=lambda: verdicts.append(v.verify(task, SLOW_HOSTILE["many_documents"][0]).detail)
    )
    try:
        slow.start()
        while not v.pool.busy_pids() and slow.is_alive():
            slow.join(0.01)
        for pid in v.pool.busy_pids():
            os.kill(pid, signal.SIGKILL)
        slow.join(SAFETY_S)
        assert len(verdicts) == 1 and verdicts[0].startswith("config worker: WorkerFailed")
        assert returns_within(v.verify, task, "a: 1\n").passed
    finally:
        v.close()


def test_worker_that_cannot_start_is_reported() -> None:
    broken = "import sys; sys.stderr.write('no module named yaml'); raise SystemExit(3)"
    pool = WorkerPool([sys.executable, "-c", broken], os.environ, 1, 60)
    with pytest.raises(WorkerFailed, match=r"exited \(3\).*no module named yaml"):
        returns_within(pool.call, {"op": "judge"}, 5)


def test_concurrent_verifications_use_separate_workers(verifier: ConfigVerifier) -> None:
    task = config_task(SCHEMA)
    verdicts: list[str] = []

    def one() -> None:
        verdicts.append(verifier.verify(task, "a: 1\n").status)

    threads = [threading.Thread(target=one) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(SAFETY_S)
    assert verdicts == ["pass"] * 4
    assert len(verifier.pool.idle_pids()) <= 2


@pytest.mark.parametrize(
    ("field", "value"), [("timeout_s", 0), ("max_workers", 0), ("start_timeout_s", -1)]
)
def test_limits_fail_at_construction(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=field):
        ConfigLimits(**{field: value})
