"""``--format json``: each command CI reads prints one JSON object with stable keys.

``curate --format json`` is checked in test_curate.py, on its shared run.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tasksieve.pipeline.cli import main

CLEAN = "Write a SQL query that returns the total revenue per region from the sales table."
OTHER = "Return the number of vowels in a string, counting both upper and lower case letters."


@pytest.fixture()
def tasks(tmp_path: Path) -> Path:
    path = tmp_path / "tasks.jsonl"
    rows = [{"id": "t1", "prompt": CLEAN}, {"id": "t2", "prompt": OTHER}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + "{broken\n")
    return path


def one_json(capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    """The only stdout line, parsed."""
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 1, out
    value = json.loads(out[0])
    assert isinstance(value, dict)
    return value


def test_decontaminate_json(
    tmp_path: Path, tasks: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bench = tmp_path / "bench.jsonl"
    bench.write_text(json.dumps({"task_id": "b1", "prompt": CLEAN}) + "\n")
    out = tmp_path / "out"
    argv = ["decontaminate", "-i", str(tasks), "-b", str(bench), "-o", str(out), "--explain"]
    assert main([*argv, "--format", "json"]) == 0
    got = one_json(capsys)  # --explain went to stderr, stdout stays one object
    assert got == {
        "output": str(out),
        "clean": 1,
        "contaminated": 1,
        "unreadable": 1,
        "benchmarks": got["benchmarks"],
        "report": str(out / "contamination.parquet"),
    }
    assert got["benchmarks"] == json.loads((out / "summary.json").read_text())["benchmarks"]


def test_benchmarks_build_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bench = tmp_path / "mine.jsonl"
    bench.write_text(
        "".join(json.dumps({"task_id": f"q{i}", "prompt": CLEAN}) + "\n" for i in (1, 2))
    )
    idx = tmp_path / "idx"
    assert main(["benchmarks", "build", "-b", str(bench), "-o", str(idx), "--format", "json"]) == 0
    assert one_json(capsys) == {
        "output": str(idx),
        "benchmarks": [{"benchmark": "mine", "items": 2, "path": str(idx / "mine.parquet")}],
    }


def test_dedup_index_add_json(
    tmp_path: Path, tasks: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    idx = tmp_path / "dedup"
    argv = ["dedup-index", "add", "-i", str(tasks), "--index", str(idx), "--format", "json"]
    assert main(argv) == 0
    got = one_json(capsys)
    assert (got["index"], got["added"]) == (str(idx), 2)
    assert (idx / str(got["part"])).is_file()
