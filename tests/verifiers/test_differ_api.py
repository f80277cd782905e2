"""The API differ: one call dropped or one argument changed; varied initial states; final state."""

from __future__ import annotations

import ast
import difflib
import json
from typing import Any

import pytest

from tasksieve.schemas import TaskRecord
from tasksieve.verifiers.families.api.differ import ApiDiffer, api_calls, variations
from tasksieve.verifiers.families.probes import Probe, ProbeInfraError
from tasksieve.verifiers.sandbox.process.sandbox import ProcessSandbox

pytest.importorskip("moto")

REF = """import boto3

s3 = boto3.client("s3")
sqs = boto3.client("sqs")
body = s3.get_object(Bucket="inbox-b", Key="a.txt")["Body"].read()
s3.put_object(Bucket="outbox-b", Key="a.txt", Body=body.upper())  # copy, shouting
url = sqs.get_queue_url(QueueName="done")["QueueUrl"]
sqs.send_message(QueueUrl=url, MessageBody="copied", DelaySeconds=0)
print(len(body), flush=True)
"""
INITIAL = {
    "buckets": {"inbox-b": {"a.txt": "hello\nworld\n"}, "outbox-b": {}},
    "queues": ["done"],
    "queue_messages": {"done": ["earlier"]},
}


def _task(reference: str = REF) -> TaskRecord:
    return TaskRecord.model_validate(
        {
            "id": "api.t",
            "family": "api",
            "prompt": "copy",
            "verifier": {
                "family": "api",
                "services": ["s3", "sqs"],
                "initial_state": INITIAL,
                "expected_state": {"objects": {"outbox-b": {"a.txt": "HELLO\nWORLD\n"}}},
            },
            "reference_solution": reference,
        }
    )


@pytest.fixture(scope="module")
def sandbox() -> ProcessSandbox:
    return ProcessSandbox()


# ---------------------------------------------------------------- mutants (no sandbox)
def test_only_calls_on_boto3_clients_count() -> None:
    names = [c.func.attr for c in api_calls(ast.parse(REF))]  # type: ignore[attr-defined]
    assert names == ["get_object", "put_object", "get_queue_url", "send_message"]


def test_each_mutant_parses_and_changes_exactly_one_line_of_the_reference() -> None:
    made = ApiDiffer().mutants(_task(), 50, 0)
    assert {m.operator for m in made} == {"api.drop_call", "api.change_arg"}
    drops = [m for m in made if m.operator == "api.drop_call"]
    assert {m.where.split()[2] for m in drops} == {"put_object()", "send_message()"}  # standalone
    for m in made:
        ast.parse(m.solution)
        changed = [
            ln
            for ln in difflib.ndiff(REF.splitlines(), m.solution.splitlines())
            if ln.startswith(("+ ", "- "))
        ]
        assert len(changed) == 2, m.where  # one line out, one line in; comments kept
    assert len({m.solution for m in made}) == len(made)


@pytest.mark.parametrize("limit", [0, 1, 5])
def test_mutants_are_capped_and_deterministic(limit: int) -> None:
    d = ApiDiffer()
    assert len(d.mutants(_task(), limit, 2)) == limit
    assert d.mutants(_task(), limit, 2) == d.mutants(_task(), limit, 2)


@pytest.mark.parametrize("source", ["def (:", "pass\n", "import os\nos.remove('x')\n"])
def test_no_api_call_or_no_parse_gives_no_mutants(source: str) -> None:
    assert ApiDiffer().mutants(_task(source), 10, 0) == []


# ---------------------------------------------------------------- probes (no sandbox)
def test_variations_differ_from_the_initial_state_and_depend_on_the_seed() -> None:
    task = _task()
    found = variations(task.verifier.initial_state, 3)  # type: ignore[union-attr]
    assert len(found) >= 5
    for _, state in found:
        assert state != INITIAL
    labels = [p.label for p in ApiDiffer().probes(task, 3, 3)]
    assert labels == [label for label, _ in found[:3]]
    assert variations(task.verifier.initial_state, 3) != variations(  # type: ignore[union-attr]
        task.verifier.initial_state,  # type: ignore[union-attr]
        4,
    )


# ---------------------------------------------------------------- observations (sandbox)
def _probes(task: TaskRecord, labels: tuple[str, ...]) -> list[Probe]:
    return [p for p in ApiDiffer().probes(task, 20, 0) if p.label in labels]


@pytest.mark.slow
def test_observation_is_the_final_state_after_the_solution_ran(sandbox: ProcessSandbox) -> None:
    task = _task()
    probes = _probes(task, ("every object's last line repeated", "one more message in every queue"))
    hostile = "import os, signal\nos.killpg(0, signal.SIGKILL)\n"
    dropped = REF.replace(
        'sqs.send_message(QueueUrl=url, MessageBody="copied", DelaySeconds=0)', "pass"
    )
    d = ApiDiffer()
    ref, again, bad, mutant = d.observe(task, [REF, REF, hostile, dropped], probes, sandbox)
    longer = json.loads(ref[0].value)
    assert longer["s3"]["outbox-b"].keys() == {"a.txt"}  # the reference wrote its copy
    assert longer["sqs"]["done"]["messages"] == ["copied", "earlier"]
    more = json.loads(ref[1].value)
    assert sorted(more["sqs"]["done"]["messages"]) == ["copied", "earlier", "earlier"]
    assert all(d.agree(task, a, b) for a, b in zip(ref, again, strict=True))
    assert all(not o.ok for o in bad)
    assert not any(d.agree(task, a, b) for a, b in zip(ref, mutant, strict=True))


@pytest.mark.slow
def test_a_sandbox_without_boto3_is_an_infra_error(sandbox: ProcessSandbox) -> None:
    task = _task()
    probes = ApiDiffer().probes(task, 1, 0)
    with pytest.raises(ProbeInfraError, match="probe"):
        ApiDiffer(site=[]).observe(task, [REF], probes, sandbox)


def test_agree_is_equality_of_normalised_states() -> None:
    from tasksieve.verifiers.families.api.differ import normalise
    from tasksieve.verifiers.families.probes import Observation

    a: dict[str, Any] = {"sqs": {"queues": {"q": {"messages": ["b", "a"], "hidden": 0}}}}
    b: dict[str, Any] = {"sqs": {"queues": {"q": {"messages": ["a", "b"], "hidden": 0}}}}
    d, task = ApiDiffer(), _task()
    unordered = [Observation.of(normalise(s, True)) for s in (a, b)]
    ordered = [Observation.of(normalise(s, False)) for s in (a, b)]
    assert d.agree(task, *unordered)
    assert not d.agree(task, *ordered)
