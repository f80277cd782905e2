"""Dead letters: faults, the records a failing element holds, group semantics, the sampler."""

from __future__ import annotations

import traceback
from collections.abc import Iterable, Sequence
from typing import Any

import apache_beam as beam
import pytest
from apache_beam.testing.test_pipeline import TestPipeline as BeamPipeline
from apache_beam.testing.util import assert_that, equal_to

import tasksieve.transforms.dedup.exact
import tasksieve.transforms.dedup.near
from tasksieve.schemas import TaskRecord
from tasksieve.transforms.dedup.near import DedupConfig, NearDedup
from tasksieve.transforms.ingest.records import SourceRecord
from tasksieve.transforms.reasons import GUARDED, error_reason, is_known
from tasksieve.transforms.rollouts.guard import Isolating, failed_samples
from tasksieve.transforms.runtime.beam_ml import ModelHandler
from tasksieve.transforms.runtime.deadletter import (
    DeadLetterError,
    Fault,
    Guarded,
    dead_letter_rows,
    fault_from,
    fault_of,
    records_in,
)
from tasksieve.transforms.runtime.items import Item, Scored
from tasksieve.transforms.samplers import SamplerConfig, SampleRequest, Samples


def _item(task_id: str, prompt: str = "Write add(a, b).", line: int = 1) -> Item:
    task = TaskRecord.model_validate(
        {
            "id": task_id,
            "family": "code",
            "prompt": prompt,
            "verifier": {
                "family": "code",
                "style": "asserts",
                "entry_point": "add",
                "asserts": ["assert add(1, 2) == 3"],
            },
            "reference_solution": "def add(a, b):\n    return a + b\n",
        }
    )
    return Item(task, "in.jsonl", line, "x", raw=f'{{"id": "{task_id}"}}')


def _raised(exc: BaseException) -> BaseException:
    try:
        raise exc
    except BaseException as caught:
        return caught


# ---------------------------------------------------------------- reason codes
def test_every_guarded_stage_has_a_registered_error_code() -> None:
    assert all(is_known(error_reason(stage)) for stage in GUARDED)


def test_an_unknown_stage_has_no_error_code() -> None:
    with pytest.raises(ValueError, match="unknown stage 'ingest'"):
        error_reason("ingest")


def test_a_fault_refuses_an_unknown_stage() -> None:
    with pytest.raises(ValueError, match="unknown stage"):
        Fault(stage="nope", error_type="ValueError", message="m")


# ---------------------------------------------------------------- faults
def test_fault_from_beam_keeps_type_message_and_innermost_frame() -> None:
    exc = _raised(KeyError("verifier"))
    lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
    fault = fault_from("gates", (type(exc), repr(exc), lines))
    assert (fault.error_type, fault.message) == ("KeyError", "'verifier'")
    assert "_raised" in fault.traceback
    assert "Traceback (most recent call last)" not in fault.traceback


@pytest.mark.parametrize(
    ("exc", "summary"),
    [
        (ValueError(), "filter raised ValueError"),
        (ValueError("two\nlines   here"), "filter raised ValueError: two lines here"),
        (
            ZeroDivisionError("division by zero"),
            "filter raised ZeroDivisionError: division by zero",
        ),
    ],
)
def test_fault_summary_is_one_line(exc: BaseException, summary: str) -> None:
    assert fault_of("filter", _raised(exc)).summary() == summary


def test_a_huge_error_is_cut_but_keeps_its_innermost_frame() -> None:
    fault = Fault("verify", "RuntimeError", "m" * 50_000, "frame\n" * 10_000 + "innermost here")
    detail = fault.detail()
    assert len(detail) <= 2000
    assert detail.startswith("verify raised RuntimeError: mmm")
    assert detail.endswith("innermost here")


# ---------------------------------------------------------------- records in an element
A, B = _item("a"), _item("b", line=2)
SRC = SourceRecord("in.jsonl", 7, {"id": "s", "family": "sql"}, None, '{"id": "s"}')
SAMPLES = Samples("a", ["x"], "m", "replay", 1)


@pytest.mark.parametrize(
    ("element", "ids"),
    [
        (A, ["a"]),
        (SRC, ["s"]),
        (Scored(A, 4, 2, "m", 4), ["a"]),
        (("a", [A, B]), ["a", "b"]),  # a GroupByKey group: every member
        (("k", {"item": [A], "drop": [], "absorbed": []}), ["a"]),  # a CoGroupByKey join
        ((A, SAMPLES), ["a"]),  # samples are not records
        ([A, A, (A,)], ["a"]),  # the same record once
        ("a string is not iterated", []),
        (((((([A],),),),),), []),  # deeper than the walk goes
        (None, []),
    ],
)
def test_records_in(element: Any, ids: list[str]) -> None:
    assert [_id(r) for r in records_in(element)] == ids


def _id(record: Item | Scored | SourceRecord) -> str:
    if isinstance(record, Scored):
        return record.item.id
    if isinstance(record, Item):
        return record.id
    assert record.data is not None
    return str(record.data["id"])


def test_an_input_record_keeps_its_source_and_raw_text() -> None:
    fault = Fault("validate", "TypeError", "bad")
    (row,) = dead_letter_rows((SRC, fault), "r1")
    assert (row["record_id"], row["family"], row["source_line"]) == ("s", "sql", 7)
    assert (row["raw"], row["reason"], row["stage"]) == (
        '{"id": "s"}',
        "validate.error",
        "validate",
    )


def test_a_scored_task_keeps_its_counts() -> None:
    (row,) = dead_letter_rows((Scored(A, 4, 1, "m", 5), Fault("filter", "E", "m")), "r1")
    assert (row["n"], row["k"], row["n_requested"], row["pass_rate"]) == (4, 1, 5, None)


def test_an_element_without_a_record_fails_loudly() -> None:
    with pytest.raises(DeadLetterError, match="holding no record"):
        list(dead_letter_rows((("k", 3), Fault("near_dedup", "E", "m")), "r1"))


# ---------------------------------------------------------------- steps on the DirectRunner
def _explode_on(target: str) -> Any:
    def fn(x: str) -> Iterable[str]:
        yield x  # produced before the failure: must not come out
        if x == target:
            raise RuntimeError(f"bad {x}")

    return fn


def test_guarded_step_keeps_good_elements_and_rejects_the_bad_one() -> None:
    with BeamPipeline() as p:
        out = (
            p
            | beam.Create([A, B])
            | Guarded(beam.FlatMap(lambda it: _explode_on("b")(it.id)), "filter", "r1")
        )
        assert_that(out["ok"], equal_to(["a"]), label="ok")
        assert_that(
            out["rejected"]
            | beam.Map(lambda r: (r["record_id"], r["reason"], r["detail"].split("\n")[0])),
            equal_to([("b", "filter.error", "filter raised RuntimeError: bad b")]),
            label="rejected",
        )


def test_a_failing_exact_dedup_group_rejects_every_member(monkeypatch: pytest.MonkeyPatch) -> None:
    real = tasksieve.transforms.dedup.exact.decide_group

    def decide(items: Iterable[Item], run_id: str) -> Any:
        members = list(items)
        if any(it.id == "dup1" for it in members):
            raise RuntimeError("group crash")
        return real(members, run_id)

    monkeypatch.setattr(tasksieve.transforms.dedup.exact, "decide_group", decide)
    items = [_item("dup1", "P one", 1), _item("dup2", "P one", 2), _item("other", "P two", 3)]
    with BeamPipeline() as p:
        out = p | beam.Create(items) | tasksieve.transforms.dedup.exact.ExactDedup("r1")
        assert_that(out["ok"] | beam.Map(lambda it: it.id), equal_to(["other"]), label="ok")
        assert_that(
            out["rejected"] | beam.Map(lambda r: (r["record_id"], r["reason"])),
            equal_to([("dup1", "exact_dedup.error"), ("dup2", "exact_dedup.error")]),
            label="rejected",
        )


WORDS = " ".join(f"word{i}" for i in range(60))


def test_a_failing_pair_check_rejects_both_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    real = tasksieve.transforms.dedup.near.confirm

    def confirm(kv: Any, threshold: float) -> Any:
        ids = {kv[0][3], *(other[3] for other, _ in kv[1]["half"])}
        if "near1" in ids:
            raise RuntimeError("pair crash")
        return real(kv, threshold)

    monkeypatch.setattr(tasksieve.transforms.dedup.near, "confirm", confirm)
    items = [
        _item("near1", WORDS + " alpha", 1),
        _item("near2", WORDS + " beta", 2),
        _item("alone", "Something else entirely, about SQL joins.", 3),
    ]
    with BeamPipeline() as p:
        out = p | beam.Create(items) | NearDedup(DedupConfig(), "r1")
        assert_that(out["ok"] | beam.Map(lambda it: it.id), equal_to(["alone"]), label="ok")
        assert_that(
            out["rejected"] | beam.Map(lambda r: (r["record_id"], r["reason"])),
            equal_to([("near1", "near_dedup.error"), ("near2", "near_dedup.error")]),
            label="rejected",
        )


def test_an_item_whose_signing_raises_is_rejected_and_the_rest_signed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Signing a batch that holds the poisoned prompt raises; each item is then signed alone,
    so only that item is rejected and the near-duplicate pair in the same batch is decided."""
    real = tasksieve.transforms.dedup.near.shingle_hashes

    def shingle_hashes(prompts: list[str], cfg: Any) -> Any:
        if any("poison" in p for p in prompts):
            raise ValueError("cannot shingle this")
        return real(prompts, cfg)

    monkeypatch.setattr(tasksieve.transforms.dedup.near, "shingle_hashes", shingle_hashes)
    items = [
        _item("near1", WORDS + " alpha", 1),
        _item("bad", "poison " + WORDS, 2),
        _item("near2", WORDS + " beta", 3),
        _item("alone", "Something else entirely, about SQL joins.", 4),
    ]
    with BeamPipeline() as p:
        out = p | beam.Create([items]) | beam.FlatMap(lambda x: x) | NearDedup(DedupConfig(), "r1")
        assert_that(out["ok"] | beam.Map(lambda it: it.id), equal_to(["near1", "alone"]), "ok")
        assert_that(
            out["rejected"]
            | beam.Map(lambda r: (r["record_id"], r["reason"], "cannot shingle" in r["detail"])),
            equal_to([("bad", "near_dedup.error", True), ("near2", "dedup.near", False)]),
            label="rejected",
        )


# ---------------------------------------------------------------- the sampler
class _Sampler(ModelHandler[SampleRequest, Samples, None]):
    """Echoes each prompt as its completion; raises on a batch holding a ``bad`` task."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[int] = []

    def load_model(self) -> None:
        return None

    def run_inference(
        self, batch: Sequence[SampleRequest], model: None, inference_args: Any = None
    ) -> Iterable[Samples]:
        self.calls.append(len(batch))
        if any(r.task_id.startswith("bad") for r in batch):
            raise ConnectionError("server went away")
        return [Samples(r.task_id, [r.prompt], "m", "fake", 1) for r in batch]


CFG = SamplerConfig(backend="replay", replay_path="r.jsonl", samples=1)


def _req(task_id: str) -> SampleRequest:
    return SampleRequest(task_id, "code", f"prompt {task_id}")


def test_a_failing_batch_is_sampled_one_by_one() -> None:
    inner = _Sampler()
    out = list(Isolating(inner, CFG).run_inference([_req("a"), _req("bad"), _req("c")], None))
    assert [(s.task_id, s.completions, s.error is None) for s in out] == [
        ("a", ["prompt a"], True),
        ("bad", [], False),
        ("c", ["prompt c"], True),
    ]
    assert "replay sampler raised ConnectionError: server went away" in str(out[1].error)
    assert inner.calls == [3, 1, 1, 1]


def test_a_good_batch_is_sampled_once() -> None:
    inner = _Sampler()
    out = list(Isolating(inner, CFG).run_inference([_req("a"), _req("b")], None))
    assert [s.task_id for s in out] == ["a", "b"]
    assert inner.calls == [2]


@pytest.mark.parametrize(
    ("element", "ids"),
    [
        ([("a", _req("a")), ("b", _req("b"))], ["a", "b"]),  # a batch RunInference failed
        (("a", _req("a")), ["a"]),  # a request that failed before batching
        (("a", Samples("a", [], "m", "fake", 1)), ["a"]),  # a result that failed after
        (_item("a"), ["a"]),  # a task whose request could not be built
        ([("a", _req("a")), ("a", _req("a"))], ["a"]),  # each task once
    ],
)
def test_failed_sampler_elements_become_error_samples(element: Any, ids: list[str]) -> None:
    out = list(failed_samples((element, Fault("rollouts", "OSError", "gone")), CFG))
    assert [task_id for task_id, _ in out] == ids
    assert all(s.task_id == t and s.error and not s.completions for t, s in out)
    assert all(s.requested == CFG.samples for _, s in out)
