"""End to end: `tasksieve eval` and `eval compare` on the curated examples (replay sampler)."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tasksieve.pipeline.cli import main
from tasksieve.pipeline.eval.catalog import connect
from tasksieve.pipeline.eval.passk import pass_at_k
from tasksieve.schemas import FAMILIES
from tests.eval.conftest import EXAMPLES, REPLAY, eval_argv

pytestmark = pytest.mark.slow


def _scores(out: Path) -> list[dict[str, Any]]:
    return pq.read_table(out / "scores").to_pylist()


def test_every_family_is_scored_with_curated_buckets(eval_a: Path, curated: Path) -> None:
    scores = _scores(eval_a)
    assert {s["family"] for s in scores} == set(FAMILIES)
    kept = pq.read_table(curated / "tasks").num_rows
    manifest = json.loads((eval_a / "manifest.json").read_text())
    assert manifest["kind"] == "eval"
    assert manifest["counts"]["input"] == kept == len(scores) + manifest["counts"]["rejected"]
    assert all(s["bucket"] != "uncalibrated" and s["n"] == 4 for s in scores)


def test_summary_pass_at_k_is_the_mean_of_the_task_estimates(eval_a: Path) -> None:
    scores = _scores(eval_a)
    summary = json.loads((eval_a / "summary.json").read_text())
    for k in (1, 2, 4):
        want = sum(pass_at_k(s["n"], s["c"], k) or 0 for s in scores) / len(scores)
        got = summary["overall"]["pass_at_k"][str(k)]
        assert got["value"] == pytest.approx(want)
        assert got["ci_low"] <= got["value"] <= got["ci_high"]
        code = [s for s in scores if s["family"] == "code"]
        fam = sum(pass_at_k(s["n"], s["c"], k) or 0 for s in code) / len(code)
        assert summary["by_family"]["code"]["pass_at_k"][str(k)]["value"] == pytest.approx(fam)


def test_catalog_views_answer_per_family(eval_a: Path) -> None:
    con = connect(eval_a)
    fams = dict(con.execute("SELECT family, tasks FROM family_pass").fetchall())
    assert set(fams) == set(FAMILIES)
    wrong = con.execute("SELECT sum(count) FROM failures WHERE kind = 'wrong'").fetchone()
    assert wrong is not None and wrong[0] == sum(s["fail_wrong"] for s in _scores(eval_a))


def test_compare_names_the_lost_tasks_and_says_worse(eval_a: Path, eval_b: Path) -> None:
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        assert main(["eval", "compare", str(eval_a), str(eval_b), "--format", "json"]) == 0
    result = json.loads(stdout.getvalue())
    solved_code = {s["task_id"] for s in _scores(eval_a) if s["family"] == "code" and s["c"] > 0}
    assert set(result["flipped"]["lost"]) == solved_code and result["flipped"]["gained"] == []
    assert result["verdict"] == "worse"
    assert result["metrics"]["reward_base"]["diff"] < 0
    assert result["by_family"]["sql"]["verdict"] == "not distinguishable"


def test_compare_of_an_eval_with_itself_is_not_distinguishable(eval_a: Path) -> None:
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        assert main(["eval", "compare", str(eval_a), str(eval_a), "--format", "json"]) == 0
    result = json.loads(stdout.getvalue())
    assert (
        result["verdict"] == "not distinguishable" and result["metrics"]["pass_at_1"]["diff"] == 0
    )


def test_task_files_are_validated_and_the_bad_ones_rejected(tmp_path: Path) -> None:
    src = tmp_path / "in"
    src.mkdir()
    (src / "sql.jsonl").write_text((EXAMPLES / "sql.jsonl").read_text() + '{"id": 3}\n')
    out = tmp_path / "out"
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(eval_argv(src, out, REPLAY)) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["rejected_by_reason"].get("validate.schema", 0) >= 1
    counts = manifest["counts"]
    assert counts["input"] == counts["scored"] + counts["rejected"]
    assert {s["bucket"] for s in _scores(out)} == {"uncalibrated"}


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--k", "8"], "exceeds --samples"),
        (["--sampler", "replay"], "--replay"),
    ],
)
def test_bad_flags_exit_2_with_a_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    argv = eval_argv(EXAMPLES, tmp_path / "out", REPLAY)
    if extra[0] == "--sampler":
        argv = argv[: argv.index("--replay")] + argv[argv.index("--replay") + 2 :]
    assert main([*argv, *extra]) == 2
    assert message in capsys.readouterr().err


def test_compare_refuses_what_is_not_an_eval(
    curated: Path, eval_a: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["eval", "compare", str(curated), str(eval_a)]) == 2
    assert "not an eval output" in capsys.readouterr().err


def test_report_page_shows_every_family_without_scripts(eval_a: Path) -> None:
    page = (eval_a / "report.html").read_text()
    assert "<script" not in page and "Content-Security-Policy" in page
    assert all(f"<td>{fam}</td>" in page for fam in FAMILIES)
    assert 'img class="fig"' in page  # the pass@k figure (matplotlib is in the dev env)


def test_a_missing_input_exits_2_and_leaves_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(eval_argv(tmp_path / "nowhere", tmp_path / "out", REPLAY)) == 2
    assert "nowhere: no such file or directory" in capsys.readouterr().err
    assert [p.name for p in tmp_path.iterdir()] == []
