"""The DAG folder imports cleanly and ``tasksieve_curate`` has the shape the README describes.

The DagBag is filled in a child process with a fresh AIRFLOW_HOME and no metadata database,
so a DAG that touched Variables or the database while being parsed would fail here too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.airflow.harness import DAG_ID, DAGS, needs_airflow, run_python

pytestmark = [pytest.mark.airflow, pytest.mark.slow, needs_airflow]

DUMP = r"""
import json, sys
from airflow.dag_processing.dagbag import DagBag

bag = DagBag(dag_folder=sys.argv[1])
out = {"import_errors": {k: str(v) for k, v in bag.import_errors.items()}, "dags": {}}
for dag_id, dag in bag.dags.items():
    cycle = None
    try:
        dag.check_cycle()
    except Exception as exc:
        cycle = str(exc)
    out["dags"][dag_id] = {
        "cycle": cycle,
        "max_active_runs": dag.max_active_runs,
        "params": dag.params.dump(),
        "tasks": {
            t.task_id: {
                "upstream": sorted(t.upstream_task_ids),
                "retries": t.retries,
                "timeout_s": t.execution_timeout.total_seconds() if t.execution_timeout else None,
                "trigger_rule": str(t.trigger_rule.value if hasattr(t.trigger_rule, "value")
                                    else t.trigger_rule),
                "on_failure_callback": bool(t.on_failure_callback),
            }
            for t in dag.tasks
        },
    }
print(json.dumps(out))
"""

EXPECTED_UPSTREAM = {
    "resolve_config": [],
    "validate_inputs": ["resolve_config"],
    "curate": ["resolve_config", "validate_inputs"],
    "quality_gate": ["curate", "resolve_config"],
    "publish": ["curate", "quality_gate", "resolve_config"],
    "train": ["publish", "resolve_config"],
}
PARAMS = (
    "inputs",
    "output_root",
    "sampler",
    "replay",
    "samples",
    "runner",
    "pipeline_options",
    "expectations",
    "fail_on_invalid_inputs",
    "train_command",
)


@pytest.fixture(scope="module")
def bag(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    home = tmp_path_factory.mktemp("airflow_home")
    proc = run_python(DUMP, str(DAGS), home=home)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return data


@pytest.fixture(scope="module")
def dag(bag: dict[str, Any]) -> dict[str, Any]:
    assert DAG_ID in bag["dags"], sorted(bag["dags"])
    info: dict[str, Any] = bag["dags"][DAG_ID]
    return info


def test_dag_folder_has_no_import_errors(bag: dict[str, Any]) -> None:
    assert bag["import_errors"] == {}


def test_every_python_file_in_the_folder_defines_a_dag(bag: dict[str, Any]) -> None:
    files = sorted(p.stem for p in Path(DAGS).glob("*.py"))
    assert files == ["tasksieve_curate"]
    assert sorted(bag["dags"]) == [DAG_ID]


def test_dag_has_no_cycle_airflow_check(dag: dict[str, Any]) -> None:
    assert dag["cycle"] is None


def test_dag_has_no_cycle_own_topological_sort(dag: dict[str, Any]) -> None:
    upstream = {t: set(info["upstream"]) for t, info in dag["tasks"].items()}
    done: list[str] = []
    while upstream:
        ready = sorted(t for t, ups in upstream.items() if ups <= set(done))
        assert ready, f"cycle among {sorted(upstream)}"
        done.extend(ready)
        for t in ready:
            del upstream[t]
    assert done.index("quality_gate") < done.index("publish") < done.index("train")


def test_tasks_and_dependencies(dag: dict[str, Any]) -> None:
    assert {t: info["upstream"] for t, info in dag["tasks"].items()} == EXPECTED_UPSTREAM


def test_params_default_to_null_so_variables_apply(dag: dict[str, Any]) -> None:
    assert dag["params"] == dict.fromkeys(PARAMS)


@pytest.mark.parametrize("task_id", sorted(EXPECTED_UPSTREAM))
def test_each_task_has_a_timeout_and_the_failure_callback(
    dag: dict[str, Any], task_id: str
) -> None:
    info = dag["tasks"][task_id]
    assert info["timeout_s"] and info["timeout_s"] > 0
    assert info["on_failure_callback"]


@pytest.mark.parametrize(("task_id", "retries"), [("curate", 1), ("publish", 2), ("train", 0)])
def test_retries_per_task(dag: dict[str, Any], task_id: str, retries: int) -> None:
    assert dag["tasks"][task_id]["retries"] == retries


def test_publish_runs_after_a_passed_or_disabled_gate_only(dag: dict[str, Any]) -> None:
    assert dag["tasks"]["publish"]["trigger_rule"] == "none_failed"
    assert dag["tasks"]["train"]["trigger_rule"] == "all_success"


def test_one_run_at_a_time(dag: dict[str, Any]) -> None:
    assert dag["max_active_runs"] == 1
