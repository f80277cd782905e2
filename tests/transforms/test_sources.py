"""Streaming input readers: formats, hostile inputs, file discovery and memory flatness."""

from __future__ import annotations

import gzip
import inspect
import json
import os
import re
import tracemalloc
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tasksieve.transforms.ingest import json_values
from tasksieve.transforms.ingest.files import InputError, expand_inputs, input_format
from tasksieve.transforms.ingest.readers import iter_source_records
from tasksieve.transforms.ingest.records import SourceRecord


def task(tid: str = "t1") -> dict[str, Any]:
    """A minimal valid code task (style asserts)."""
    return {
        "id": tid,
        "family": "code",
        "prompt": "Write f() returning 1.",
        "verifier": {
            "family": "code",
            "style": "asserts",
            "entry_point": "f",
            "asserts": ["assert f() == 1"],
        },
        "reference_solution": "def f():\n    return 1\n",
    }


def records(path: Path | str) -> list[SourceRecord]:
    return list(iter_source_records(str(path)))


def write_bytes(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


# ---------------------------------------------------------------- JSONL
def test_jsonl_reads_objects_with_line_numbers_and_skips_blank_lines(tmp_path: Path) -> None:
    body = json.dumps(task("a")) + "\n\n   \n" + json.dumps(task("b")) + "\n"
    recs = records(write_bytes(tmp_path / "t.jsonl", body.encode()))
    assert [(r.line, r.data["id"] if r.data else None, r.error) for r in recs] == [
        (1, "a", None),
        (4, "b", None),
    ]
    assert recs[0].raw == json.dumps(task("a"))
    assert recs[0].source_file == str(tmp_path / "t.jsonl")


@pytest.mark.parametrize(
    ("line", "error"),
    [
        (b'{"a": 1 "b": 2}', "invalid JSON: Expecting ',' delimiter at column 9"),
        (b'  {"a": 1 "b": 2}', "invalid JSON: Expecting ',' delimiter at column 11"),
        (b'{"a": "\xff"}', "not UTF-8 (byte 0xff at column 8)"),
        (b'{"a": "caf\xc3"}', "not UTF-8 (byte 0xc3 at column 11)"),
        (b"[1, 2]", "expected a JSON object, got array"),
        (b'"text"', "expected a JSON object, got string"),
        (b"null", "expected a JSON object, got null"),
        (b'{"a":', "invalid JSON: Expecting value at column 6"),
        (b"{'a': 1}", "invalid JSON: Expecting property name enclosed in double quotes"),
    ],
    ids=[
        "missing-comma",
        "indented",
        "bad-byte",
        "cut-utf8",
        "array",
        "string",
        "null",
        "truncated",
        "single-quotes",
    ],
)
def test_jsonl_bad_line_is_a_record_with_error_and_later_lines_still_read(
    tmp_path: Path, line: bytes, error: str
) -> None:
    good = json.dumps(task()).encode()
    recs = records(write_bytes(tmp_path / "t.jsonl", good + b"\n" + line + b"\n" + good + b"\n"))
    assert [r.line for r in recs] == [1, 2, 3]
    bad = recs[1]
    assert bad.data is None
    assert bad.error is not None and bad.error.startswith(error), bad.error
    assert bad.raw  # kept for rejected/
    assert recs[2].data == task()


BIG = 100_000


def _big_texts() -> dict[str, str]:
    """Record texts over 100 KB: valid, schema-invalid and unparseable, with unicode."""
    valid = task("big")
    valid["prompt"] = "Write f() returning 1. é→∑ " + "x" * BIG
    return {
        "valid": json.dumps(valid, ensure_ascii=False),
        "unterminated": '{"id": "u", "prompt": "' + "y" * BIG,
        "bad_syntax": '{"id": "b" "prompt": "' + "z" * BIG + '"}',
    }


@pytest.mark.parametrize("kind", ["valid", "unterminated", "bad_syntax"])
@pytest.mark.parametrize("container", ["jsonl", "jsonl.gz", "json_array", "json_values"])
def test_raw_is_the_whole_record_text(tmp_path: Path, kind: str, container: str) -> None:
    text = _big_texts()[kind]
    if container == "json_array" and kind == "unterminated":
        pytest.skip("an unterminated last element ends the array: the file is an InputError")
    small = json.dumps(task("small"))
    if container.startswith("jsonl"):
        body = (small + "\n" + text + "\n").encode()
        if container.endswith(".gz"):
            body = gzip.compress(body)
    elif container == "json_array":
        body = ("[" + small + ",\n" + text + "\n]").encode()
    else:
        body = (small + "\n" + text + "\n").encode()
    name = {"jsonl": "t.jsonl", "jsonl.gz": "t.jsonl.gz"}.get(container, "t.json")
    recs = records(write_bytes(tmp_path / name, body))
    assert recs[1].raw == text
    assert (recs[1].data is None) == (kind != "valid")


def test_jsonl_utf8_bom_and_crlf_are_accepted(tmp_path: Path) -> None:
    a, b = (json.dumps(task(t)).encode() for t in "ab")
    body = b"\xef\xbb\xbf" + a + b"\r\n" + b
    recs = records(write_bytes(tmp_path / "t.jsonl", body))
    assert [r.data["id"] for r in recs if r.data] == ["a", "b"]


@pytest.mark.parametrize("name", ["t.jsonl.gz", "t.gz", "t.jsonl"])
def test_gzipped_jsonl_is_read_by_suffix_or_magic_bytes(tmp_path: Path, name: str) -> None:
    body = (json.dumps(task("a")) + "\n{bad\n").encode()
    recs = records(write_bytes(tmp_path / name, gzip.compress(body)))
    assert recs[0].data == task("a")
    assert recs[1].line == 2 and recs[1].error and "invalid JSON" in recs[1].error


def test_truncated_gzip_raises_input_error_naming_path(tmp_path: Path) -> None:
    data = gzip.compress((json.dumps(task()) + "\n").encode() * 200)
    path = write_bytes(tmp_path / "t.jsonl.gz", data[: len(data) // 2])
    with pytest.raises(InputError, match=re.escape("t.jsonl.gz")):
        records(path)


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("e.jsonl", b""),
        ("e.jsonl", b"\n  \n"),
        ("e.jsonl.gz", gzip.compress(b"")),
        ("e.json", b""),
        ("e.json", b" \n"),
        ("e.json", b"[]"),
    ],
)
def test_empty_inputs_yield_no_records(tmp_path: Path, name: str, data: bytes) -> None:
    assert records(write_bytes(tmp_path / name, data)) == []


# ---------------------------------------------------------------- JSON
def _pretty_array(n: int) -> tuple[str, list[int]]:
    """A pretty-printed JSON array of n tasks and the line each element starts on."""
    text = json.dumps([task(f"t{i}") for i in range(n)], indent=2)
    lines = [i + 1 for i, ln in enumerate(text.splitlines()) if ln == "  {"]
    return text, lines


@pytest.mark.parametrize("chunk", [3, 17, 1 << 16])
def test_json_array_streams_elements_with_start_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    monkeypatch.setattr(json_values, "_CHUNK", chunk)
    text, starts = _pretty_array(20)
    recs = records(write_bytes(tmp_path / "a.json", text.encode()))
    assert [r.data for r in recs] == json.loads(text)
    assert [r.line for r in recs] == starts
    assert json.loads(recs[3].raw) == task("t3")


@pytest.mark.parametrize("chunk", [4, 1 << 16])
def test_json_array_bad_element_is_reported_and_the_rest_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    monkeypatch.setattr(json_values, "_CHUNK", chunk)
    body = '[\n  {"id": "a"},\n  {"id": "b" "x": [1, {"y": "],"}]},\n  {"id": "c"}\n]\n'
    recs = records(write_bytes(tmp_path / "a.json", body.encode()))
    assert [(r.line, r.data) for r in recs] == [(2, {"id": "a"}), (3, None), (4, {"id": "c"})]
    assert recs[1].error == "invalid JSON: Expecting ',' delimiter at line 3 column 14"
    assert recs[1].raw == '{"id": "b" "x": [1, {"y": "],"}]}'


def test_json_minified_array_error_column_survives_buffer_compaction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(json_values, "_CHUNK", 8)
    good = json.dumps({"id": "a"})
    body = "[" + ",".join([good] * 10) + ',{"id" 1}]'
    recs = records(write_bytes(tmp_path / "a.json", body.encode()))
    col = body.index('{"id" 1}') + 7  # 1-based column of the "1"
    assert recs[-1].error == f"invalid JSON: Expecting ':' delimiter at line 1 column {col}"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b'{"id": "a"}', [{"id": "a"}]),
        (b'\xef\xbb\xbf{"id": "a"}\n', [{"id": "a"}]),
        (b'{"id": "a"}\n{"id": "b"}\n', [{"id": "a"}, {"id": "b"}]),
        (b'[{"id": "a"}, 3]', [{"id": "a"}, None]),
        (b'"just text"', [None]),
    ],
    ids=["single-object", "bom", "json-lines-in-json", "non-object-element", "top-level-string"],
)
def test_json_top_level_shapes(tmp_path: Path, body: bytes, expected: list[Any]) -> None:
    assert [r.data for r in records(write_bytes(tmp_path / "a.json", body))] == expected


def test_json_non_utf8_element_is_one_bad_record(tmp_path: Path) -> None:
    body = b'[{"id": "a"},\n {"id": "\xff"},\n {"id": "c"}]'
    recs = records(write_bytes(tmp_path / "a.json", body))
    assert [r.data for r in recs] == [{"id": "a"}, None, {"id": "c"}]
    assert recs[1].error == "not UTF-8 (byte 0xff at line 2 column 10)"
    assert recs[1].raw == '{"id": "\\xff"}'


def test_json_missing_comma_rejects_the_following_element(tmp_path: Path) -> None:
    recs = records(write_bytes(tmp_path / "a.json", b'[{"id": "a"} {"id": "b"}]'))
    assert recs[0].data == {"id": "a"}
    assert recs[1].data is None
    assert recs[1].error == "invalid JSON: missing ',' before line 1 column 14"


@pytest.mark.parametrize(
    ("body", "match"),
    [
        (b'[{"id": "a"}', "not closed"),
        (b'[{"id": "a"},', "not closed"),
        (b'[{"id": "a"},]', "',' before ']'"),
        (b'[{"id": "a"}] x', "unexpected data after the JSON array"),
    ],
)
def test_json_broken_array_structure_is_an_input_error(
    tmp_path: Path, body: bytes, match: str
) -> None:
    with pytest.raises(InputError, match=match) as info:
        records(write_bytes(tmp_path / "a.json", body))
    assert "a.json" in str(info.value)


def test_json_truncated_last_element_is_reported_before_the_input_error(tmp_path: Path) -> None:
    path = write_bytes(tmp_path / "a.json", b'[{"id": "a"}, {"id": "b')
    it = iter_source_records(str(path))
    assert next(it).data == {"id": "a"}
    bad = next(it)
    assert bad.data is None and bad.error and bad.error.startswith("invalid JSON: Unterminated")
    with pytest.raises(InputError, match="not closed"):
        next(it)


# ---------------------------------------------------------------- Parquet and Arrow
def _task_table(rows: list[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist(rows)


def test_parquet_rows_become_dicts_with_nested_structs_and_nulls_dropped(tmp_path: Path) -> None:
    bad = task("b")
    del bad["prompt"]  # a bad row: prompt becomes null in the column, then absent
    rows = [task("a"), bad, task("c")]
    path = tmp_path / "t.parquet"
    pq.write_table(_task_table(rows), path, row_group_size=2)
    recs = records(path)
    assert [r.line for r in recs] == [1, 2, 3]
    assert recs[0].data == task("a")
    assert recs[1].data == bad
    assert json.loads(recs[2].raw) == task("c")


def test_parquet_map_column_becomes_a_dict(tmp_path: Path) -> None:
    table = pa.table(
        {"id": ["a"], "metadata": pa.array([[("k", "v")]], type=pa.map_(pa.string(), pa.string()))}
    )
    pq.write_table(table, tmp_path / "m.parquet")
    (rec,) = records(tmp_path / "m.parquet")
    assert rec.data == {"id": "a", "metadata": {"k": "v"}}


@pytest.mark.parametrize("data", [b"", b"PAR1 not really parquet", b"\x00" * 100])
def test_corrupt_parquet_raises_input_error_naming_path(tmp_path: Path, data: bytes) -> None:
    path = write_bytes(tmp_path / "bad.parquet", data)
    with pytest.raises(InputError, match=re.escape("bad.parquet")):
        records(path)


def _save_dataset(root: Path, rows: list[dict[str, Any]]) -> Path:
    """Write a directory shaped like ``datasets.Dataset.save_to_disk`` output."""
    root.mkdir(parents=True)
    table = _task_table(rows)
    with (
        pa.OSFile(str(root / "data-00000-of-00001.arrow"), "wb") as sink,
        pa.ipc.new_stream(sink, table.schema) as writer,
    ):
        writer.write_table(table, max_chunksize=2)
    (root / "dataset_info.json").write_text(json.dumps({"features": {}}))
    (root / "state.json").write_text(
        json.dumps({"_data_files": [{"filename": "data-00000-of-00001.arrow"}]})
    )
    return root


def test_datasets_dir_is_read_from_its_arrow_files(tmp_path: Path) -> None:
    ds = _save_dataset(tmp_path / "ds", [task("a"), task("b"), task("c")])
    arrow = str(ds / "data-00000-of-00001.arrow")
    assert input_format(str(ds)) == "arrow-dataset"
    assert expand_inputs([str(ds)]) == [arrow]
    assert input_format(arrow) == "arrow-dataset"
    recs = records(arrow)
    assert [r.data for r in recs] == [task("a"), task("b"), task("c")]
    assert [r.line for r in recs] == [1, 2, 3]
    assert [r.data for r in records(ds)] == [r.data for r in recs]


def test_dataset_dict_dir_expands_to_every_split(tmp_path: Path) -> None:
    root = tmp_path / "dd"
    _save_dataset(root / "train", [task("a")])
    _save_dataset(root / "test", [task("b")])
    (root / "dataset_dict.json").write_text(json.dumps({"splits": ["train", "test"]}))
    assert expand_inputs([str(root)]) == [
        str(root / "test" / "data-00000-of-00001.arrow"),
        str(root / "train" / "data-00000-of-00001.arrow"),
    ]


def test_corrupt_arrow_file_raises_input_error(tmp_path: Path) -> None:
    path = write_bytes(tmp_path / "x.arrow", b"not arrow at all")
    with pytest.raises(InputError, match=re.escape("x.arrow")):
        records(path)


# ---------------------------------------------------------------- finding inputs
def _tree(tmp_path: Path) -> Path:
    root = tmp_path / "in"
    (root / "sub" / "deeper").mkdir(parents=True)
    (root / ".hidden").mkdir()
    for rel in [
        "a.jsonl",
        "sub/b.json",
        "sub/deeper/c.jsonl.gz",
        "sub/d.parquet",
        ".hidden/x.jsonl",
        "README.md",
        "sub/notes.txt",
    ]:
        (root / rel).write_bytes(b"")
    return root


def test_directory_expands_recursively_to_supported_files_only(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    assert expand_inputs([str(root)]) == [
        str(root / "a.jsonl"),
        str(root / "sub" / "b.json"),
        str(root / "sub" / "d.parquet"),
        str(root / "sub" / "deeper" / "c.jsonl.gz"),
    ]


def test_globs_with_double_star_are_sorted_and_deduplicated(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    got = expand_inputs([f"{root}/**/*.jsonl*", str(root / "a.jsonl"), f"{root}/./a.jsonl"])
    assert got == [str(root / "a.jsonl"), str(root / "sub" / "deeper" / "c.jsonl.gz")]


@pytest.mark.parametrize(
    ("pattern", "match"),
    [
        ("missing.jsonl", "missing.jsonl: no such file or directory"),
        ("nothing-*.jsonl", "nothing-\\*.jsonl: matches no files"),
        ("*.md", "matches no supported input files"),
        ("README.md", "README.md: unsupported format"),
        ("emptydir", "emptydir: directory holds no supported input files"),
    ],
)
def test_bad_patterns_raise_input_error_naming_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pattern: str, match: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "README.md").write_text("hi")
    (tmp_path / "emptydir").mkdir()
    with pytest.raises(InputError, match=match):
        expand_inputs([pattern])


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        ("a.jsonl", "jsonl"),
        ("a.JSONL.GZ", "jsonl"),
        ("a.ndjson", "jsonl"),
        ("a.json", "json"),
        ("a.json.gz", "json"),
        ("a.parquet", "parquet"),
        ("a.arrow", "arrow-dataset"),
    ],
)
def test_input_format_by_suffix(name: str, fmt: str) -> None:
    assert input_format(name) == fmt


def test_missing_file_raises_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=re.escape("gone.jsonl: no such file")):
        records(tmp_path / "gone.jsonl")


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root reads any file")
def test_unreadable_file_raises_input_error(tmp_path: Path) -> None:
    path = write_bytes(tmp_path / "locked.jsonl", b"{}\n")
    path.chmod(0)
    with pytest.raises(InputError, match=re.escape("locked.jsonl: cannot read")):
        records(path)


# ---------------------------------------------------------------- streaming
def test_reader_is_lazy(tmp_path: Path) -> None:
    path = write_bytes(tmp_path / "t.jsonl", (json.dumps(task()) + "\n").encode() * 3)
    it = iter_source_records(str(path))
    first = next(it)
    assert first.line == 1
    assert inspect.isgenerator(it)


def _peak_while_draining(path: Path) -> tuple[int, int]:
    tracemalloc.start()
    try:
        count = sum(1 for _ in iter_source_records(str(path)))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return count, peak


@pytest.mark.parametrize("name", ["big.jsonl", "big.json"])
def test_memory_stays_flat_in_file_size(tmp_path: Path, name: str) -> None:
    n = 50_000
    path = tmp_path / name
    with open(path, "w") as f:
        if name.endswith(".json"):
            f.write("[\n" + ",\n".join(json.dumps(task(f"t{i}")) for i in range(n)) + "\n]\n")
        else:
            f.writelines(json.dumps(task(f"t{i}")) + "\n" for i in range(n))
    size = path.stat().st_size
    count, peak = _peak_while_draining(path)
    assert count == n
    assert size > 10_000_000
    assert peak < 2_000_000, f"peak {peak} bytes while reading a {size}-byte file"
