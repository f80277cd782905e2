"""An ``Item`` pickled through Beam's coder comes back equal, with every task of the examples.

``Item.__reduce__`` sends the task as ``model_dump()`` data and validates it again on the
way in; a task whose dump would not validate again, or would validate to a different task,
would break every stage boundary, so each example record of every family is tried."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pytest
from apache_beam.coders import registry

from tasksieve.schemas import Finding, GateResult, TaskRecord
from tasksieve.schemas.validation import validate_record
from tasksieve.transforms.ingest.files import expand_inputs
from tasksieve.transforms.ingest.readers import iter_source_records
from tasksieve.transforms.runtime.items import Item, canonical_json, sha256_text

ROOT = Path(__file__).resolve().parents[2]


def _items() -> list[Item]:
    out = []
    for path in expand_inputs((str(ROOT / "examples" / "tasks"),)):
        for rec in iter_source_records(path):
            task = None if rec.data is None else validate_record(path, rec.line, rec.data)[0]
            if task is not None:
                digest = sha256_text(canonical_json(rec.data))
                out.append(Item(task, rec.source_file, rec.line, digest, raw=rec.raw))
    return out


def test_every_example_item_survives_beams_coder_and_pickle() -> None:
    items = _items()
    assert {it.task.family for it in items} >= {"code", "sql", "config", "api"}
    coder = registry.get_coder(Item)
    for it in items:
        for back in (coder.decode(coder.encode(it)), pickle.loads(pickle.dumps(it))):
            assert back == it, it.id
            assert back.task.model_dump() == it.task.model_dump(), it.id
            assert type(back.task.verifier) is type(it.task.verifier), it.id


def test_stage_results_travel_with_the_item_and_the_encoding_is_smaller() -> None:
    it = _items()[0]
    it.findings.append(Finding(kind="near_dup", other_id="t-2", method="minhash", score=0.9))
    it.gates.append(GateResult(gate="reference_passes", passed=True, detail="ok"))
    it.reference_s = 0.25
    back = pickle.loads(pickle.dumps(it))
    assert back.findings == it.findings and back.gates == it.gates
    assert back.reference_s == 0.25
    assert len(pickle.dumps(it.task.model_dump())) < 0.75 * len(pickle.dumps(it.task))


def test_a_decoded_items_task_is_validated_only_when_read(monkeypatch: Any) -> None:
    """The host stages read id, family and prompt from the plain data; ``task`` validates it
    once, on first read; an Item never read is encoded again from the same data."""
    it = _items()[0]
    calls = []
    real = TaskRecord.model_validate

    def counting(data: Any, *args: Any, **kwargs: Any) -> TaskRecord:
        calls.append(1)
        return real(data, *args, **kwargs)

    monkeypatch.setattr(TaskRecord, "model_validate", counting)
    back = pickle.loads(pickle.dumps(it))
    assert (back.id, back.family, back.prompt) == (it.id, it.task.family, it.task.prompt)
    assert back.order_key == it.order_key and back.raw == it.raw
    again = pickle.loads(pickle.dumps(back))  # through a second shuffle unread
    assert calls == []
    assert again.task == it.task and calls == [1]
    assert again.task is again.task and calls == [1]
    assert again == it and back == it


def test_a_task_changed_after_decoding_travels_changed() -> None:
    it = _items()[0]
    back = pickle.loads(pickle.dumps(it))  # the task frozen, so replaced whole, never read
    back.task = it.task.model_copy(update={"prompt": "changed after the shuffle"})
    assert back.prompt == "changed after the shuffle"
    assert pickle.loads(pickle.dumps(back)).task.prompt == "changed after the shuffle"


def test_an_item_without_a_task_says_which_attribute_is_missing() -> None:
    back = pickle.loads(pickle.dumps(_items()[0]))
    with pytest.raises(AttributeError, match="no_such_field"):
        _ = back.no_such_field  # type: ignore[attr-defined]
    assert not hasattr(back, "no_such_field")
