"""``RowsToTables`` builds the same Arrow tables as Beam's ``WriteToParquet`` converter did,
across record-batch boundaries, with nulls and with rows that leave optional fields out."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from apache_beam.io.parquetio import _RowDictionariesToArrowTable
from apache_beam.transforms.window import GlobalWindow

from tasksieve.schemas.arrow import REJECTED_SCHEMA
from tasksieve.transforms import write
from tasksieve.transforms.runtime.items import rejection


def _rows(n: int) -> list[dict[str, Any]]:
    rows = []
    for i in range(n):
        row = rejection(
            stage="validate",
            reason="validate.schema",
            detail=f"bad field {i}",
            run_id="r1",
            source_file=f"f{i % 3}.jsonl",
            source_line=i,
            record_id=None if i % 7 == 0 else f"t-{i}",
            raw=f'{{"id": "t-{i}"}}',
            n=None if i % 2 else i,
            pass_rate=None if i % 2 else i / n,
        )
        if i % 5 == 0:  # an optional field left out reads as null
            del row["pass_rate"]
        rows.append(row)
    return rows


def _beams(rows: list[dict[str, Any]]) -> pa.Table:
    fn = _RowDictionariesToArrowTable(REJECTED_SCHEMA, record_batch_size=1000)
    out = [t for row in rows for t in fn.process(row, w=GlobalWindow())]
    return pa.concat_tables(out + [wv.value for wv in fn.finish_bundle()])


def _ours(rows: list[dict[str, Any]]) -> list[pa.Table]:
    fn = write.RowsToTables(REJECTED_SCHEMA, "write.rejected")
    fn.start_bundle()
    out = [t for row in rows for t in fn.process(row)]
    return out + [wv.value for wv in fn.finish_bundle()]


@pytest.mark.parametrize("n", [0, 1, 999, 2345])
def test_the_tables_equal_beams(n: int) -> None:
    rows = _rows(n)
    ours = _ours(rows)
    if n == 0:
        assert ours == []
        return
    assert len(ours) == 1  # one table per bundle below TABLE_BYTES
    assert ours[0].equals(_beams(rows))
    assert ours[0].num_rows == n and ours[0].schema == REJECTED_SCHEMA


def test_a_large_bundle_is_sent_in_several_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(write, "TABLE_BYTES", 1)  # every full batch is a table of its own
    rows = _rows(2500)
    ours = _ours(rows)
    assert [t.num_rows for t in ours] == [1000, 1000, 500]
    assert pa.concat_tables(ours).equals(_beams(rows))


def test_a_value_of_the_wrong_type_fails_with_arrows_message() -> None:
    rows = _rows(3)
    rows[1]["source_line"] = "not a number"
    with pytest.raises((pa.ArrowInvalid, pa.ArrowTypeError)):
        _ours(rows)
