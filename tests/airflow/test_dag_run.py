"""Real runs of ``tasksieve_curate`` with ``airflow dags test`` on Airflow's SQLite database.

Two DAG runs on examples/tasks (sql + config, replay sampler, DirectRunner):

1. a clean run: every task runs, the gate passes, ``ROOT/current`` points at the run and the
   ``train_command`` (a stand-in script) runs on it;
2. a run with one malformed input line more (validate counts it, curate rejects it) whose
   output is damaged after curate wrote it and before the gate reads it (a thread
   deletes a non-empty ``tasks/`` shard as soon as the run's directory appears, as a lost file
   on a shared disk would): the real ``tasksieve check`` finds the shards disagreeing with the
   manifest, the gate fails, publish does not run and ``current`` stays on run 1.

``output_root`` comes from the Airflow Variable ``tasksieve_output_root``, the rest from the
run's conf (params). The module takes 3 to 4 minutes on a busy 2-core machine.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.airflow.harness import DAG_ID, REPO, needs_airflow, run_airflow

pytestmark = [pytest.mark.airflow, pytest.mark.slow, needs_airflow]

INPUTS = [str(REPO / "examples/tasks/sql.jsonl"), str(REPO / "examples/tasks/config.jsonl")]
REPLAY = str(REPO / "examples/replay/completions.jsonl")
CONF = {"inputs": INPUTS, "sampler": "replay", "replay": REPLAY, "samples": 4}
# A stand-in trainer: records what it was given and reads the dataset's manifest.
TRAINER = (
    "import json, os, sys, pathlib; ds = pathlib.Path(sys.argv[1]); "
    "pathlib.Path(sys.argv[2]).write_text(json.dumps({'arg': str(ds), "
    "'env': os.environ['TASKSIEVE_DATASET'], "
    "'kept': json.loads((ds / 'manifest.json').read_text())['counts']['kept']}))"
)


@dataclass
class Runs:
    home: Path
    root: Path
    first: str  # Airflow run ids
    second: str
    first_log: str
    second_log: str
    second_rc: int
    damaged: Path | None  # the shard the saboteur deleted in run 2
    trained: Path  # what the run-1 train_command recorded


def _db(home: Path) -> sqlite3.Connection:
    return sqlite3.connect(home / "airflow.db")


def _run_ids(home: Path) -> list[str]:
    with _db(home) as db:
        rows = db.execute("select run_id from dag_run where dag_id=? order by id", (DAG_ID,))
        return [r[0] for r in rows]


def _delete_a_tasks_shard(run_dir: Path) -> Path:
    for shard in sorted((run_dir / "tasks").rglob("*.parquet")):
        if pq.read_metadata(shard).num_rows:
            shard.unlink()
            return shard
    raise AssertionError(f"no non-empty tasks shard in {run_dir}")


def _saboteur(runs_dir: Path, spare: Path, stop: threading.Event, hit: list[Path]) -> None:
    """Delete a shard of the first finished run directory other than ``spare``."""
    while not stop.is_set():
        for run_dir in runs_dir.glob("[!.]*"):
            if run_dir != spare and (run_dir / "manifest.json").is_file():
                hit.append(_delete_a_tasks_shard(run_dir))
                return
        stop.wait(0.02)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    home = tmp_path_factory.mktemp("airflow_home")
    root = tmp_path_factory.mktemp("dataset_root")
    trained = root.parent / "trained.json"
    migrate = run_airflow("db", "migrate", home=home)
    assert migrate.returncode == 0, migrate.stderr[-3000:]
    var = run_airflow("variables", "set", "tasksieve_output_root", str(root), home=home)
    assert var.returncode == 0, var.stderr[-3000:]

    conf1 = {**CONF, "train_command": [sys.executable, "-c", TRAINER, "{dataset}", str(trained)]}
    one = run_airflow("dags", "test", DAG_ID, "--conf", json.dumps(conf1), home=home)
    assert one.returncode == 0, (one.stdout + one.stderr)[-5000:]
    (first,) = _run_ids(home)

    bad = root.parent / "bad_input.jsonl"  # one malformed line: counted, then rejected
    bad.write_text('{"id": "broken", "family": \n')
    conf2 = {**CONF, "inputs": [*INPUTS, str(bad)]}
    stop, hit = threading.Event(), []
    spare = root / "runs" / (root / "current").readlink().name
    saboteur = threading.Thread(target=_saboteur, args=(root / "runs", spare, stop, hit))
    saboteur.start()
    try:
        two = run_airflow("dags", "test", DAG_ID, "--conf", json.dumps(conf2), home=home)
    finally:
        stop.set()
        saboteur.join()
    second = _run_ids(home)[1]
    return Runs(
        home=home,
        root=root,
        first=first,
        second=second,
        first_log=one.stdout + one.stderr,
        second_log=two.stdout + two.stderr,
        second_rc=two.returncode,
        damaged=hit[0] if hit else None,
        trained=trained,
    )


def _state(runs: Runs, run_id: str) -> str:
    with _db(runs.home) as db:
        (state,) = db.execute("select state from dag_run where run_id=?", (run_id,)).fetchone()
        return str(state)


def _task_states(runs: Runs, run_id: str) -> dict[str, str]:
    with _db(runs.home) as db:
        rows = db.execute(
            "select task_id, state from task_instance where run_id=? and dag_id=?",
            (run_id, DAG_ID),
        )
        return {t: s for t, s in rows}


def _xcom(runs: Runs, run_id: str, task_id: str, key: str = "return_value") -> Any:
    with _db(runs.home) as db:
        row = db.execute(
            "select value from xcom where run_id=? and task_id=? and key=?", (run_id, task_id, key)
        ).fetchone()
    assert row is not None, f"no XCom {task_id}.{key} in {run_id}"
    return json.loads(row[0])


def _run_dir(runs: Runs, run_id: str) -> Path:
    return Path(_xcom(runs, run_id, "resolve_config")["run_dir"])


def test_first_run_succeeds_with_every_task(runs: Runs) -> None:
    assert _state(runs, runs.first) == "success"
    assert _task_states(runs, runs.first) == {
        "resolve_config": "success",
        "validate_inputs": "success",
        "curate": "success",
        "quality_gate": "success",
        "publish": "success",
        "train": "success",
    }


def test_train_command_ran_on_the_published_run(runs: Runs) -> None:
    seen = json.loads(runs.trained.read_text())
    run_dir = str(_run_dir(runs, runs.first))
    assert seen["arg"] == seen["env"] == run_dir
    assert seen["kept"] == _xcom(runs, runs.first, "curate")["counts"]["kept"]


def test_output_root_came_from_the_variable(runs: Runs) -> None:
    assert _run_dir(runs, runs.first).parent == runs.root.resolve() / "runs"


def test_current_points_at_the_first_run(runs: Runs) -> None:
    current = runs.root / "current"
    assert current.is_symlink()
    assert current.resolve() == _run_dir(runs, runs.first)


def test_run_id_and_manifest_counts_are_in_xcom(runs: Runs) -> None:
    pushed = _xcom(runs, runs.first, "curate")
    manifest = json.loads((_run_dir(runs, runs.first) / "manifest.json").read_text())
    assert pushed["tasksieve_run_id"] == manifest["run_id"]
    assert pushed["counts"] == manifest["counts"]
    assert _xcom(runs, runs.first, "curate", "counts") == manifest["counts"]
    assert manifest["counts"]["input"] == 12  # sql.jsonl + config.jsonl


def test_gate_result_is_in_xcom(runs: Runs) -> None:
    gate = _xcom(runs, runs.first, "quality_gate")
    assert gate["success"] is True
    assert gate["failed"] == 0
    assert gate["checked"] > 0


def test_invalid_input_record_is_counted_then_rejected_with_its_reason(runs: Runs) -> None:
    assert _xcom(runs, runs.first, "validate_inputs")["problems"] == 0
    assert _xcom(runs, runs.second, "validate_inputs")["problems"] == 1
    assert _xcom(runs, runs.second, "curate")["rejected_by_reason"]["validate.parse_error"] == 1


def test_second_run_was_really_damaged(runs: Runs) -> None:
    assert runs.damaged is not None
    assert runs.damaged.is_relative_to(_run_dir(runs, runs.second))


def test_second_run_fails_at_the_gate(runs: Runs) -> None:
    assert runs.second_rc != 0
    assert _state(runs, runs.second) == "failed"
    states = _task_states(runs, runs.second)
    assert states["curate"] == "success"
    assert states["quality_gate"] == "failed"
    assert states["publish"] == "upstream_failed"
    assert states["train"] == "upstream_failed"


def test_the_gate_failed_on_the_damage(runs: Runs) -> None:
    checks = json.loads((_run_dir(runs, runs.second) / "checks.json").read_text())
    assert checks["success"] is False
    failed = {(r["suite"], r["expectation"]) for r in checks["results"] if not r["success"]}
    assert ("tasks", "expect_table_row_count_to_equal") in failed


def test_failed_gate_leaves_current_on_the_first_run(runs: Runs) -> None:
    assert (runs.root / "current").resolve() == _run_dir(runs, runs.first)
    assert (_run_dir(runs, runs.first) / "manifest.json").is_file()


def test_failure_callback_logged_run_and_task(runs: Runs) -> None:
    line = f"tasksieve_curate failure: run_id={runs.second} task_id=quality_gate"
    assert line in runs.second_log
    assert "tasksieve_curate failure" not in runs.first_log


def test_missing_inputs_fail_the_first_task_at_once(runs: Runs) -> None:
    """No `inputs` param and no Variable: resolve_config fails on its first try, says how to fix."""
    before = _run_ids(runs.home)
    proc = run_airflow(
        "dags", "test", DAG_ID, "--conf", json.dumps({"sampler": "replay"}), home=runs.home
    )
    (third,) = [r for r in _run_ids(runs.home) if r not in before]
    assert proc.returncode != 0
    assert "no inputs: set the param `inputs` or the Variable tasksieve_inputs" in (
        proc.stdout + proc.stderr
    )
    with _db(runs.home) as db:
        state, tries = db.execute(
            "select state, try_number from task_instance where run_id=? and task_id=?",
            (third, "resolve_config"),
        ).fetchone()
    assert (state, tries) == ("failed", 1)  # a settings error is not retried
    assert (runs.root / "current").resolve() == _run_dir(runs, runs.first)


def test_reports_show_the_gate_result(runs: Runs) -> None:
    """The gate rewrites each run's report once checks.json exists (passed and failed)."""
    passed = (_run_dir(runs, runs.first) / "report.html").read_text()
    failed = (_run_dir(runs, runs.second) / "report.html").read_text()
    assert '<section id="quality">' in passed and "expect_table_row_count_to_equal" in passed
    assert '<section id="quality">' in failed
    assert "expect_table_row_count_to_equal" in failed.split('<section id="quality">', 1)[1]
