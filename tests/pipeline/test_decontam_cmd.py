"""`tasksieve decontaminate` and `tasksieve benchmarks build` end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tasksieve.pipeline.cli import main
from tasksieve.transforms.decontam.sets import load_humaneval

CLEAN = "Write a SQL query that returns the total revenue per region from the sales table."


@pytest.fixture()
def tasks(tmp_path: Path) -> Path:
    he = load_humaneval()[2].text
    rows = [
        {"id": "t1", "prompt": CLEAN},
        {"id": "t2", "prompt": "Solve:\n" + he},
        {
            "id": "t3",
            "prompt": "Compute the sum of the squares of odd numbers below n using "
            "a loop, nothing fancy, and return it as an integer value.",
        },
    ]
    path = tmp_path / "tasks.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n{broken\n")
    return path


def test_decontaminate_writes_clean_report_and_unreadable(tmp_path: Path, tasks: Path) -> None:
    out = tmp_path / "out"
    assert main(["decontaminate", "--input", str(tasks), "--output", str(out)]) == 0
    clean = [json.loads(x)["id"] for x in (out / "clean.jsonl").read_text().splitlines()]
    assert clean == ["t1", "t3"]
    report = pq.read_table(out / "contamination.parquet").to_pylist()
    assert {r["task_id"] for r in report} == {"t2"}
    top = [r for r in report if r["top"]]
    assert top[0]["benchmark"] == "humaneval" and top[0]["item_id"] == "HumanEval/2"
    assert len((out / "unreadable.jsonl").read_text().splitlines()) == 1


def test_report_is_queryable_with_duckdb(tmp_path: Path, tasks: Path) -> None:
    duckdb = pytest.importorskip("duckdb")
    out = tmp_path / "out"
    assert main(["decontaminate", "--input", str(tasks), "--output", str(out)]) == 0
    rows = duckdb.sql(
        f"select method, count(*) from '{out}/contamination.parquet' group by 1"
    ).fetchall()
    assert rows and all(n >= 1 for _, n in rows)


def test_user_benchmark_via_built_index(tmp_path: Path) -> None:
    bench = tmp_path / "mybench.jsonl"
    bench.write_text(json.dumps({"qid": "q7", "question": CLEAN}) + "\n")
    idx = tmp_path / "idx"
    assert (
        main(
            [
                "benchmarks",
                "build",
                "--benchmark",
                str(bench),
                "--output",
                str(idx),
                "--benchmark-field",
                "question",
                "--benchmark-id-field",
                "qid",
            ]
        )
        == 0
    )
    assert (idx / "mybench.parquet").exists()
    tasks = tmp_path / "t.jsonl"
    tasks.write_text(json.dumps({"id": "a", "prompt": CLEAN.upper()}) + "\n")
    out = tmp_path / "out"
    assert main(["decontaminate", "-i", str(tasks), "-b", str(idx), "-o", str(out)]) == 0
    report = pq.read_table(out / "contamination.parquet").to_pylist()
    assert report[0]["benchmark"] == "mybench" and report[0]["item_id"] == "q7"


@pytest.mark.parametrize("bad", [["-b", "/nope/bench.jsonl"], ["--decontam-threshold", "2"]])
def test_user_mistakes_are_clean_errors(
    tmp_path: Path, tasks: Path, bad: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["decontaminate", "-i", str(tasks), "-o", str(tmp_path / "o"), *bad])
    err = capsys.readouterr().err
    assert code == 2 and "error:" in err and "Traceback" not in err


def test_existing_output_needs_overwrite(tmp_path: Path, tasks: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    assert main(["decontaminate", "-i", str(tasks), "-o", str(out)]) == 2
    assert main(["decontaminate", "-i", str(tasks), "-o", str(out), "--overwrite"]) == 0


def test_dedup_index_add_then_curate_flag_parses(tmp_path: Path, tasks: Path) -> None:
    idx = tmp_path / "dedup"
    assert main(["dedup-index", "add", "--input", str(tasks), "--index", str(idx)]) == 0
    assert (idx / "index.json").exists() and list(idx.glob("part-*.parquet"))
