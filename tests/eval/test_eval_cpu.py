"""Sandbox CPU seconds in an eval: per task in ``scores/``, in the summary's cost, in compare."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tasksieve.pipeline.eval.agent_scores import step_costs
from tasksieve.pipeline.eval.compare import compare, render_compare
from tasksieve.pipeline.eval.run import scores_schema
from tasksieve.pipeline.eval.scores import task_score
from tasksieve.pipeline.eval.summary import summarise
from tasksieve.schemas import Rollout, Verdict

META = {"task_id": "t", "family": "code", "source": "s", "curated_pass_rate": 0.5}


def _row(index: int, status: str, cpu_s: float | None) -> dict[str, Any]:
    return Rollout(
        task_id="t",
        family="code",
        sample_index=index,
        model_id="m",
        sampler="replay",
        completion="x = 1",
        solution="x = 1",
        verdict=Verdict(status=status, duration_s=0.5, cpu_s=cpu_s),  # type: ignore[arg-type]
        run_id="r",
    ).model_dump()


def test_task_cpu_is_the_sum_of_the_measured_verdicts_and_says_how_many() -> None:
    s = task_score(
        [_row(0, "pass", 0.25), _row(1, "fail", None), _row(2, "fail", 0.5)], META, [1], 1
    )
    assert s["sandbox_cpu_s"] == pytest.approx(0.75) and s["cpu_measured"] == 2
    assert s["sandbox_s"] == pytest.approx(1.5)
    none = task_score([_row(0, "pass", None)], META, [1], 1)
    assert none["sandbox_cpu_s"] is None and none["cpu_measured"] == 0
    old = _row(0, "pass", None)
    del old["verdict"]["cpu_s"]  # a rollout row written before verdicts carried it
    assert task_score([old], META, [1], 1)["cpu_measured"] == 0


def test_agent_steps_cpu_adds_to_the_verdicts() -> None:
    steps = [
        {"task_id": "t", "duration_s": 0.5, "cpu_s": 0.25},
        {"task_id": "t", "duration_s": 0.25, "cpu_s": None},  # a submit: no command
        {"task_id": "u", "duration_s": 1.0, "cpu_s": None},
    ]
    per_task = step_costs(steps)
    assert per_task == {"t": (0.75, 0.25), "u": (1.0, None)}
    wall, cpu = per_task["t"]
    s = task_score([_row(0, "pass", 0.5)], META, [1], 1, True, wall, cpu)
    assert s["sandbox_cpu_s"] == pytest.approx(0.75) and s["cpu_measured"] == 1
    assert s["sandbox_s"] == pytest.approx(1.25)
    only_steps = task_score([_row(0, "pass", None)], META, [1], 1, True, wall, cpu)
    assert only_steps["sandbox_cpu_s"] == pytest.approx(0.25)
    neither = task_score([_row(0, "pass", None)], META, [1], 1, True, 1.0, None)
    assert neither["sandbox_cpu_s"] is None


def test_summary_reports_cpu_per_task_and_per_solved_task() -> None:
    solved = task_score([_row(0, "pass", 0.25), _row(1, "fail", 0.5)], META, [1], 1)
    unsolved = task_score([_row(0, "fail", 0.25)], {**META, "task_id": "u"}, [1], 1)
    cpu = summarise([solved, unsolved], [1], resamples=50)["overall"]["sandbox_cpu_s"]
    assert cpu["total"] == pytest.approx(1.0) and cpu["per_task"] == pytest.approx(0.5)
    assert cpu["per_solved_task"] == pytest.approx(1.0)
    assert (cpu["measured"], cpu["verdicts"]) == (3, 3)
    table = pa.Table.from_pylist([solved, unsolved], schema=scores_schema((1,)))
    assert table.column("sandbox_cpu_s").to_pylist() == pytest.approx([0.75, 0.25])


def _fake_eval(root: Path, cpu: list[float | None], with_column: bool = True) -> Path:
    rows = []
    for i, c in enumerate(cpu):
        r = task_score([_row(0, "pass", c)], {**META, "task_id": f"t{i}"}, [1], 1)
        rows.append(r)
    table = pa.Table.from_pylist(rows, schema=scores_schema((1,)))
    if not with_column:  # an eval written before scores carried the CPU seconds
        table = table.drop_columns(["sandbox_cpu_s", "cpu_measured"])
    (root / "scores").mkdir(parents=True)
    pq.write_table(table, root / "scores" / "part-00000-of-00001.parquet")
    (root / "manifest.json").write_text(json.dumps({"kind": "eval", "run_id": root.name}))
    return root


def test_compare_compares_cpu_like_the_other_costs(tmp_path: Path) -> None:
    a = _fake_eval(tmp_path / "a", [1.0, 1.2, 0.9, 1.1])
    b = _fake_eval(tmp_path / "b", [0.5, 0.6, 0.4, 0.5])
    result = compare(str(a), str(b), resamples=200)
    cpu = result["costs"]["sandbox_cpu_s"]
    assert cpu["tasks"] == 4 and cpu["diff"] == pytest.approx(-0.55)
    assert cpu["verdict"] == "better"  # B uses less CPU
    assert "sandbox_cpu_s (lower is better)" in render_compare(result)
    old = _fake_eval(tmp_path / "old", [1.0, 1.0, 1.0, 1.0], with_column=False)
    assert compare(str(old), str(b), resamples=50)["costs"]["sandbox_cpu_s"] is None


@pytest.mark.slow
def test_an_eval_on_the_process_sandbox_measures_every_code_verdict(eval_a: Path) -> None:
    scores = pq.read_table(eval_a / "scores").to_pylist()
    code = [s for s in scores if s["family"] == "code"]
    assert code and all(s["cpu_measured"] == s["attempts"] for s in code)
    assert all(s["sandbox_cpu_s"] is not None and s["sandbox_cpu_s"] > 0 for s in code)
    summary = json.loads((eval_a / "summary.json").read_text())
    cpu = summary["by_family"]["code"]["sandbox_cpu_s"]
    assert cpu["measured"] == cpu["verdicts"] > 0 and cpu["per_task"] > 0
    html = (eval_a / "report.html").read_text()
    overall = summary["overall"]["sandbox_cpu_s"]
    assert "<td>sandbox_cpu_s</td>" in html
    assert f"{overall['measured']} of {overall['verdicts']}" in html
