"""``tasksieve validate``: problem lines, duplicate ids, output formats and exit codes."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tasksieve.pipeline.commands import validate

REPO = Path(__file__).resolve().parents[2]


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


def jsonl(path: Path, *lines: dict[str, Any] | str) -> Path:
    path.write_text("".join((ln if isinstance(ln, str) else json.dumps(ln)) + "\n" for ln in lines))
    return path


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str], list[str]]:
    """Run ``validate`` through a parser built like the real CLI; return rc, out and err lines."""
    parser = argparse.ArgumentParser(prog="tasksieve")
    validate.add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["validate", *argv])
    rc = validate.run(args)
    out, err = capsys.readouterr()
    return rc, out.splitlines(), err.splitlines()


def test_all_valid_exits_0_with_summary_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = jsonl(tmp_path / "a.jsonl", task("a"), task("b"))
    rc, out, err = cli(capsys, str(path))
    assert rc == 0
    assert out == []
    assert err == ["tasksieve validate: 2 records, 0 invalid, in 1 file"]


def test_invalid_records_exit_1_with_one_line_per_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = task("b")
    del bad["prompt"]
    bad["verifier"]["asserts"] = []
    path = jsonl(tmp_path / "a.jsonl", task("a"), bad, "{oops")
    rc, out, err = cli(capsys, str(path))
    assert rc == 1
    assert out == [
        f"{path}:2: b: prompt: Field required",
        f"{path}:2: b: verifier: style 'asserts' needs a non-empty asserts list",
        f"{path}:3: -: -: invalid JSON: Expecting property name enclosed in double quotes"
        " at column 2",
    ]
    assert err == ["tasksieve validate: 3 records, 2 invalid, in 1 file; 3 problems"]


def test_duplicate_ids_across_files_are_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = jsonl(tmp_path / "a.jsonl", task("x"), task("y"))
    b = jsonl(tmp_path / "b.jsonl", task("z"), task("x"))
    rc, out, _ = cli(capsys, str(tmp_path))
    assert rc == 1
    assert out == [f"{b}:2: x: id: duplicate id, first seen at {a}:1"]


def test_json_format_is_json_lines(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = jsonl(tmp_path / "a.jsonl", {"id": "q"}, "[1]")
    rc, out, _ = cli(capsys, "--format", "json", str(path))
    assert rc == 1
    problems = [json.loads(line) for line in out]
    assert {tuple(sorted(p)) for p in problems} == {("field", "line", "message", "path", "task_id")}
    assert {
        "path": str(path),
        "line": 2,
        "task_id": "-",
        "field": "-",
        "message": "expected a JSON object, got array",
    } in problems
    assert {(p["line"], p["field"]) for p in problems} >= {(1, "prompt"), (1, "family")}


def test_max_problems_limits_output_not_checking(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = jsonl(tmp_path / "a.jsonl", "{", "{", "{", task("ok"))
    rc, out, err = cli(capsys, "--max-problems", "1", str(path))
    assert rc == 1
    assert len(out) == 1
    assert err == ["tasksieve validate: 4 records, 3 invalid, in 1 file; 3 problems, 2 not shown"]


@pytest.mark.parametrize("value", ["0", "-3", "many"])
def test_bad_max_problems_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    with pytest.raises(SystemExit) as info:
        cli(capsys, "--max-problems", value, str(tmp_path))
    assert info.value.code == 2


def test_empty_input_is_a_warning_not_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "e.jsonl"
    empty.write_text("")
    full = jsonl(tmp_path / "f.jsonl", task())
    rc, out, err = cli(capsys, str(empty), str(full))
    assert rc == 0 and out == []
    assert err == [
        f"tasksieve validate: warning: {empty}: empty input",
        "tasksieve validate: 1 record, 0 invalid, in 2 files (1 empty)",
    ]


@pytest.mark.parametrize(
    ("make", "needle"),
    [
        (lambda d: str(d / "missing.jsonl"), "missing.jsonl: no such file or directory"),
        (lambda d: str(d / "nope-*.jsonl"), "matches no files"),
        (
            lambda d: (d / "x.parquet").write_bytes(b"junk") and str(d / "x.parquet"),
            "x.parquet: not a readable Parquet file",
        ),
        (
            lambda d: (d / "x.json").write_text('[{"id": "a"}') and str(d / "x.json"),
            "x.json: JSON array is not closed",
        ),
    ],
    ids=["missing", "glob-nothing", "corrupt-parquet", "truncated-json-array"],
)
def test_input_errors_exit_2_with_one_clean_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], make: Any, needle: str
) -> None:
    rc, _, err = cli(capsys, make(tmp_path))
    assert rc == 2
    assert len(err) == 1
    assert err[0].startswith("tasksieve validate: error: ") and needle in err[0], err


def test_reads_parquet_and_reports_its_bad_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = task("b")
    bad["reference_solution"] = None
    path = tmp_path / "t.parquet"
    pq.write_table(pa.Table.from_pylist([task("a"), bad]), path)
    rc, out, _ = cli(capsys, str(path))
    assert rc == 1
    assert out == [f"{path}:2: b: reference_solution: Field required"]


def _module(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tasksieve.pipeline.commands.validate", *argv],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("content", "rc"),
    [(json.dumps(task()) + "\n", 0), ("{\n", 1), (None, 2)],
    ids=["valid", "invalid", "missing"],
)
def test_python_m_exit_codes_without_traceback(
    tmp_path: Path, content: str | None, rc: int
) -> None:
    path = tmp_path / "a.jsonl"
    if content is not None:
        path.write_text(content)
    proc = _module(str(path))
    assert proc.returncode == rc, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().count("\n") == 0  # exactly one stderr line


def test_python_m_help_documents_formats_and_exit_codes() -> None:
    proc = _module("--help")
    assert proc.returncode == 0
    assert "JSON Lines" in proc.stdout and "exit status" in proc.stdout
