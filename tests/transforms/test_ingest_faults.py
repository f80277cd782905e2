"""A corrupt or truncated input file becomes one ``ingest.unreadable_file`` rejection, locally
and on S3 (moto on loopback), and the records read before the fault still flow on."""

from __future__ import annotations

import gzip
import io
import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from tasksieve.transforms.ingest.files import InputError, expand_inputs
from tasksieve.transforms.ingest.records import SourceRecord
from tasksieve.transforms.ingest.stage import read_counted
from tasksieve.transforms.ingest.validate import ValidateFn
from tasksieve.transforms.runtime import fsio
from tests.s3_server import S3Server, s3_server


def _lines(n: int) -> bytes:
    return b"".join(json.dumps({"id": f"t{i}", "x": "y" * 50}).encode() + b"\n" for i in range(n))


def _parquet(n: int) -> bytes:
    buf = io.BytesIO()
    pq.write_table(pa.table({"id": [f"t{i}" for i in range(n)]}), buf)
    return buf.getvalue()


CORRUPT: dict[str, Callable[[], bytes]] = {
    "not_gzip.jsonl.gz": lambda: b"\x1f\x8b" + b"this is not deflate data" * 4,
    "truncated.jsonl.gz": lambda: gzip.compress(_lines(400))[:-200],
    "truncated.parquet": lambda: _parquet(50)[:-40],
    "not_parquet.parquet": lambda: b"PAR1 but nothing else",
    "unclosed.json": lambda: b'[{"id": "a"}, {"id": "b"}',
    "truncated.arrow": lambda: b"ARROW1\x00\x00garbage",
}


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    with s3_server() as server:
        fsio.configure(PipelineOptions(server.beam_args))
        yield server


def _place(where: str, name: str, data: bytes, tmp_path: Path, s3: S3Server | None) -> str:
    if where == "local":
        path = tmp_path / name
        path.write_bytes(data)
        return str(path)
    assert s3 is not None
    key = f"{tmp_path.name}/{name}"
    s3.put(key, data)
    return s3.url(key)


@pytest.fixture(params=["local", "s3"])
def where(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def place(
    where: str, tmp_path: Path, request: pytest.FixtureRequest
) -> Callable[[str, bytes], str]:
    server = request.getfixturevalue("s3") if where == "s3" else None
    return lambda name, data: _place(where, name, data, tmp_path, server)


@pytest.mark.parametrize("name", sorted(CORRUPT))
def test_a_corrupt_file_ends_with_one_whole_file_record(
    name: str, place: Callable[[str, bytes], str]
) -> None:
    path = place(name, CORRUPT[name]())
    records = list(read_counted(path))
    assert records, "the file must leave a trace"
    last = records[-1]
    assert last.whole_file and last.data is None
    assert last.source_file == path and path in str(last.error)
    assert not any(r.whole_file for r in records[:-1])


def test_records_before_a_truncation_flow_on(place: Callable[[str, bytes], str]) -> None:
    records = list(read_counted(place("cut.jsonl.gz", gzip.compress(_lines(4000))[:-500])))
    good = [r for r in records if r.data is not None]
    assert good and [r.line for r in good] == list(range(1, len(good) + 1))
    assert records[-1].whole_file and "gzip" in str(records[-1].error)


def test_a_missing_file_is_one_whole_file_record(tmp_path: Path) -> None:
    (rec,) = list(read_counted(str(tmp_path / "gone.jsonl")))
    assert rec.whole_file and "gone.jsonl" in str(rec.error)


def test_undecodable_bytes_are_a_parse_error_of_their_line_only(
    place: Callable[[str, bytes], str],
) -> None:
    path = place("latin.jsonl", b'{"id": "a"}\n{"id": "caf\xe9"}\n{"id": "b"}\n')
    records = list(read_counted(path))
    assert [(r.line, r.data is None, r.whole_file) for r in records] == [
        (1, False, False),
        (2, True, False),
        (3, False, False),
    ]
    assert "not UTF-8" in str(records[1].error)


def test_validate_rejects_a_whole_file_record_as_unreadable() -> None:
    rec = SourceRecord("s3://b/in/x.parquet", 7, None, "s3://b/in/x.parquet: corrupt", "", True)
    (out,) = list(ValidateFn("run").process(rec))
    row = out.value
    assert (row["stage"], row["reason"]) == ("ingest", "ingest.unreadable_file")
    assert (row["source_file"], row["source_line"]) == ("s3://b/in/x.parquet", 7)
    assert "corrupt" in row["detail"]


def test_s3_reading_keeps_file_and_line_provenance(s3: S3Server, tmp_path: Path) -> None:
    local = tmp_path / "a.jsonl.gz"
    local.write_bytes(gzip.compress(_lines(5)))
    s3.put("prov/a.jsonl.gz", local.read_bytes())
    remote = list(read_counted(s3.url("prov/a.jsonl.gz")))
    here = list(read_counted(str(local)))
    assert [(r.line, r.data) for r in remote] == [(r.line, r.data) for r in here]
    assert {r.source_file for r in remote} == {s3.url("prov/a.jsonl.gz")}


def test_s3_prefix_expands_like_a_directory(s3: S3Server) -> None:
    for key in ("walk/a.jsonl", "walk/sub/b.parquet", "walk/.hidden/c.jsonl", "walk/notes.txt"):
        s3.put(key, b"{}\n")
    assert expand_inputs([s3.url("walk")]) == [s3.url("walk/a.jsonl"), s3.url("walk/sub/b.parquet")]
    assert expand_inputs([s3.url("walk/*.jsonl")]) == [s3.url("walk/a.jsonl")]


@pytest.mark.parametrize("key", ["nothing/here", "nothing/*.jsonl"])
def test_s3_pattern_matching_nothing_is_an_input_error(s3: S3Server, key: str) -> None:
    with pytest.raises(InputError, match="nothing"):
        expand_inputs([s3.url(key)])
