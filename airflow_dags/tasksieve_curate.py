"""Airflow DAG ``tasksieve_curate``: validate -> curate (Beam) -> quality gate -> publish -> train.

Each DAG run curates into ``ROOT/runs/<run-name>/`` (the run name is the Airflow run id with
characters other than letters, digits, ``.``, ``_`` and ``-`` replaced by ``_``); the gate runs
``tasksieve check`` on it, and only a run that passed is published by pointing the
``ROOT/current`` symlink at it (``pipeline.outputs.publish``: a rename, so readers never see a
missing
link). A failed gate leaves ``current`` where it was; earlier runs stay readable.

Settings: every DAG param left at ``null`` falls back to the Airflow Variable
``tasksieve_<param>`` (JSON, or a plain string), then to the built-in default in ``DEFAULTS``.
Nothing here needs editing to change inputs, runner or options.

The curate step runs ``python -m pipeline.curate.beam_main`` through the Apache Beam provider's
``BeamHook`` (the same command the provider's ``BeamRunPythonPipelineOperator`` builds:
interpreter, module, ``--runner=...``, then every pipeline option as ``--key=value``), so the
runner is a setting: DirectRunner here, DataflowRunner / FlinkRunner / SparkRunner with their
options elsewhere. The operator itself is not used: with Airflow 3 it cannot be constructed
unless the Google provider is installed, whatever the runner.

What this DAG does NOT do: copy outputs to object storage (``ROOT`` must be a filesystem path
that the Airflow worker and, on a distributed runner, the Beam launcher can write), clean up
old runs, or stop two runs publishing at once other than by ``max_active_runs=1``.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import pendulum
from airflow.sdk import DAG, Param, Variable, get_current_context, task
from airflow.sdk.exceptions import AirflowException, AirflowFailException, AirflowSkipException

log = logging.getLogger(__name__)

DAG_ID = "tasksieve_curate"
VARIABLE_PREFIX = "tasksieve_"

# Built-in defaults, used when neither the param nor the Variable ``tasksieve_<name>`` is set.
DEFAULTS: dict[str, Any] = {
    "inputs": None,  # required: list of files, dirs or globs
    "output_root": None,  # required: the dataset root (runs/ and current live here)
    "sampler": "transformers",
    "replay": None,
    "samples": 4,
    "runner": "DirectRunner",
    "pipeline_options": {},
    "expectations": True,
    "fail_on_invalid_inputs": False,
    "train_command": None,
}
# Curate flags the DAG sets itself; pipeline_options may not override them. ``expectations``
# is curate's in-job gate: the DAG runs the same checks as its own task instead.
OWNED_OPTIONS = frozenset(
    {"input", "output", "overwrite", "format", "runner", "sampler", "samples", "replay"}
    | {"expectations", "no_expectations"}
)
# Exit status of `tasksieve check`: 0 passed, 1 expectations failed, 2 user error.
CHECK_PASSED, CHECK_FAILED, CHECK_USAGE = 0, 1, 2


def log_failure(context: Mapping[str, Any]) -> None:
    """on_failure_callback: one line naming the run, the task, the try and the error."""
    ti = context.get("ti")
    log.error(
        "tasksieve_curate failure: run_id=%s task_id=%s try=%s error=%s",
        context.get("run_id"),
        getattr(ti, "task_id", None),
        getattr(ti, "try_number", None),
        context.get("exception"),
    )


def _variable(name: str) -> Any:
    """The Variable ``tasksieve_<name>`` (JSON when it parses, else the string), or None."""
    raw = Variable.get(VARIABLE_PREFIX + name, default=None)
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def setting(params: Mapping[str, Any], name: str) -> Any:
    """A param, else its Variable, else the built-in default."""
    value = params.get(name)
    if value is None:
        value = _variable(name)
    return DEFAULTS[name] if value is None else value


def run_name(run_id: str) -> str:
    """A directory name for an Airflow run id (stable across retries of the same run)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", run_id).strip("._") or "run"


def _label(text: str, limit: int = 63) -> str:
    """A Beam/Dataflow job-name or label value: lowercase letters, digits and dashes."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:limit].rstrip("-") or "run"


def _python() -> str:
    """The interpreter that runs tasksieve: Variable ``tasksieve_python``, else this one."""
    value = _variable("python")
    return str(value) if value else sys.executable


def _cli(python: str, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [python, "-m", "tasksieve.pipeline.cli", *args]
    log.info("running %s", shlex.join(cmd))
    return subprocess.run(cmd, capture_output=True, text=True, check=False)


def _check_config(cfg: dict[str, Any]) -> None:
    """Fail (without retry) on settings that cannot work, saying how to fix them."""
    if not cfg["inputs"]:
        raise AirflowFailException(
            "no inputs: set the param `inputs` or the Variable tasksieve_inputs"
        )
    if not cfg["output_root"]:
        raise AirflowFailException(
            "no output root: set the param `output_root` or Variable tasksieve_output_root"
        )
    if not isinstance(cfg["pipeline_options"], dict):
        raise AirflowFailException("pipeline_options must be a JSON object of option name -> value")
    owned = sorted(OWNED_OPTIONS & {k.replace("-", "_") for k in cfg["pipeline_options"]})
    if owned:
        raise AirflowFailException(
            f"pipeline_options may not set {owned}: use the DAG params of those names"
        )
    if cfg["sampler"] == "replay" and not cfg["replay"]:
        raise AirflowFailException(
            "sampler 'replay' needs the param `replay` (recorded completions file)"
        )


default_args: dict[str, Any] = {
    "owner": "data-engineering",
    "retries": 1,
    "retry_delay": timedelta(minutes=2),
    "retry_exponential_backoff": True,
    "on_failure_callback": log_failure,
}

with DAG(
    dag_id=DAG_ID,
    description="Curate RL tasks with tasksieve, gate them on data quality, publish, train",
    schedule="@daily",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    default_args=default_args,
    doc_md=__doc__,
    tags=["tasksieve"],
    params={
        "inputs": Param(
            None,
            type=["null", "array"],
            items={"type": "string"},
            description="task files, dirs or globs (default: Variable tasksieve_inputs)",
        ),
        "output_root": Param(
            None,
            type=["null", "string"],
            description="dataset root holding runs/ and current (Variable tasksieve_output_root)",
        ),
        "sampler": Param(None, type=["null", "string"], enum=[None, "transformers", "replay"]),
        "replay": Param(None, type=["null", "string"], description="completions for 'replay'"),
        "samples": Param(None, type=["null", "integer"], minimum=1),
        "runner": Param(
            None,
            type=["null", "string"],
            description="Beam runner: DirectRunner, DataflowRunner, FlinkRunner, SparkRunner",
        ),
        "pipeline_options": Param(
            None,
            type=["null", "object"],
            description="more curate flags and Beam options, e.g. {'too_easy': 0.9, "
            "'project': 'p', 'region': 'r', 'temp_location': 'gs://b/tmp'}",
        ),
        "expectations": Param(None, type=["null", "boolean"], description="run the gate"),
        "fail_on_invalid_inputs": Param(None, type=["null", "boolean"]),
        "train_command": Param(
            None,
            type=["null", "string", "array"],
            description="trainer command run on the published run ({dataset} is its path); "
            "null: no training",
        ),
    },
) as dag:

    @task(task_id="resolve_config", retries=2, execution_timeout=timedelta(minutes=2))
    def resolve_config() -> dict[str, Any]:
        """Params, Variables and defaults merged into the run's settings."""
        from tasksieve.pipeline.outputs.layout import RUNS

        ctx = get_current_context()
        params: Mapping[str, Any] = ctx["params"]
        cfg = {name: setting(params, name) for name in DEFAULTS}
        if isinstance(cfg["inputs"], str):
            cfg["inputs"] = [cfg["inputs"]]
        _check_config(cfg)
        run_id = str(ctx["run_id"])
        root = Path(cfg["output_root"]).expanduser().resolve()
        name = run_name(run_id)
        cfg.update(
            airflow_run_id=run_id,
            run_name=name,
            root=str(root),
            run_dir=str(root / RUNS / name),
            python=_python(),
        )
        log.info("tasksieve settings: %s", json.dumps(cfg, sort_keys=True))
        return cfg

    @task(task_id="validate_inputs", execution_timeout=timedelta(minutes=20))
    def validate_inputs(cfg: dict[str, Any]) -> dict[str, Any]:
        """``tasksieve validate`` on the inputs: unreadable inputs stop the run.

        Invalid records stop it only with ``fail_on_invalid_inputs``; otherwise curate rejects
        them, each with its reason, and the count is reported here.
        """
        proc = _cli(cfg["python"], "validate", "--format", "json", *cfg["inputs"])
        problems = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
        summary = proc.stderr.strip().splitlines()[-1:] or [""]
        log.info("%s", summary[0])
        if proc.returncode == 2:
            raise AirflowFailException(
                f"tasksieve validate: cannot read the inputs: {proc.stderr.strip()}"
            )
        if proc.returncode not in (0, 1):
            raise AirflowException(f"tasksieve validate exited {proc.returncode}: {proc.stderr}")
        for p in problems[:20]:
            log.warning(
                "invalid record %s:%s %s: %s", p["path"], p["line"], p["field"], p["message"]
            )
        if problems and cfg["fail_on_invalid_inputs"]:
            raise AirflowFailException(
                f"{len(problems)} schema problems in the inputs (fail_on_invalid_inputs)"
            )
        return {"problems": len(problems), "summary": summary[0]}

    @task(task_id="curate", retries=1, execution_timeout=timedelta(hours=6))
    def curate(cfg: dict[str, Any]) -> dict[str, Any]:
        """The Beam curate job into ``ROOT/runs/<run-name>``; returns its run id and counts."""
        from airflow.providers.apache.beam.hooks.beam import BeamHook

        options: dict[str, Any] = {
            "input": list(cfg["inputs"]),
            "output": cfg["run_dir"],
            "overwrite": True,  # the directory belongs to this DAG run; a retry replaces it
            "sampler": cfg["sampler"],
            "samples": cfg["samples"],
            "format": "json",
            "job_name": _label(f"tasksieve-{cfg['run_name']}"),
            "labels": {"tasksieve-run": _label(cfg["run_name"])},
            **({"replay": cfg["replay"]} if cfg["replay"] else {}),
            **{k.replace("-", "_"): v for k, v in cfg["pipeline_options"].items()},
        }
        Path(cfg["run_dir"]).parent.mkdir(parents=True, exist_ok=True)
        BeamHook(runner=cfg["runner"]).start_python_pipeline(
            variables=options,
            py_file="tasksieve.pipeline.curate.beam_main",
            py_options=["-m"],
            py_interpreter=cfg["python"],
        )
        manifest = json.loads((Path(cfg["run_dir"]) / "manifest.json").read_text())
        return {
            "run_name": cfg["run_name"],
            "run_dir": cfg["run_dir"],
            "tasksieve_run_id": manifest["run_id"],
            "config_fingerprint": manifest["config_fingerprint"],
            "counts": manifest["counts"],
            "rejected_by_reason": manifest["rejected_by_reason"],
        }

    @task(task_id="quality_gate", retries=1, execution_timeout=timedelta(hours=1))
    def quality_gate(cfg: dict[str, Any]) -> dict[str, Any]:
        """``tasksieve check RUN_DIR``: failed expectations fail this task (no retry)."""
        if not cfg["expectations"]:
            raise AirflowSkipException("expectations are off: the run is published unchecked")
        proc = _cli(cfg["python"], "check", cfg["run_dir"])
        for line in proc.stderr.strip().splitlines()[-20:]:
            log.info("check: %s", line)
        if proc.returncode == CHECK_USAGE:
            raise AirflowFailException(
                f"tasksieve check could not check {cfg['run_dir']}: {proc.stderr.strip()}"
            )
        if proc.returncode not in (CHECK_PASSED, CHECK_FAILED):
            raise AirflowException(f"tasksieve check exited {proc.returncode}: {proc.stderr}")
        checks_path = Path(cfg["run_dir"]) / "checks.json"
        if not checks_path.is_file():
            raise AirflowFailException(
                f"tasksieve check exited {proc.returncode} but wrote no {checks_path}"
            )
        # The report was written before the checks existed: rewrite it to show them.
        report = _cli(cfg["python"], "report", cfg["run_dir"])
        if report.returncode != 0:
            log.warning("could not rewrite the report: %s", report.stderr.strip())
        checks = json.loads(checks_path.read_text())
        results: Sequence[dict[str, Any]] = checks.get("results", [])
        failed = [r for r in results if not r.get("success")]
        summary = {"success": bool(checks.get("success")), "checked": len(results)}
        if proc.returncode == CHECK_PASSED and summary["success"] and not failed:
            return {**summary, "failed": 0}
        for r in failed[:20]:
            log.error(
                "expectation failed: %s %s %s: %s",
                r.get("suite"),
                r.get("expectation"),
                r.get("column") or "",
                r.get("detail"),
            )
        raise AirflowFailException(
            f"data-quality gate failed: {len(failed)} of {len(results)} expectations failed "
            f"on {cfg['run_dir']} (see checks.json); current is left unchanged"
        )

    @task(
        task_id="publish",
        retries=2,
        execution_timeout=timedelta(minutes=5),
        trigger_rule="none_failed",  # runs after a passed gate, or a gate skipped by config
    )
    def publish(cfg: dict[str, Any], curated: dict[str, Any]) -> dict[str, Any]:
        """Point ``ROOT/current`` at this run (refused unless checks.json passed, when on)."""
        from tasksieve.pipeline.outputs.layout import NotAnOutput
        from tasksieve.pipeline.outputs.publish import NotPublishable, point_current

        try:
            current = point_current(
                Path(cfg["root"]), Path(curated["run_dir"]), require_checks=cfg["expectations"]
            )
        except (NotAnOutput, NotPublishable) as exc:
            raise AirflowFailException(str(exc)) from exc
        log.info("published %s -> %s", current, curated["run_dir"])
        return {"current": str(current), "run_dir": curated["run_dir"]}

    @task(task_id="train", retries=0, execution_timeout=timedelta(hours=24))
    def train(cfg: dict[str, Any], published: dict[str, Any]) -> dict[str, Any]:
        """Run ``train_command`` on the published run; skipped when no command is set."""
        command = cfg["train_command"]
        if not command:
            raise AirflowSkipException("no train_command: training is off")
        argv = shlex.split(command) if isinstance(command, str) else [str(a) for a in command]
        argv = [a.replace("{dataset}", published["run_dir"]) for a in argv]
        env_note = f"TASKSIEVE_DATASET={published['run_dir']}"
        log.info("training: %s (%s)", shlex.join(argv), env_note)
        proc = subprocess.run(
            argv, env={**os.environ, "TASKSIEVE_DATASET": published["run_dir"]}, check=False
        )
        if proc.returncode != 0:
            raise AirflowException(f"train_command exited {proc.returncode}")
        return {"dataset": published["run_dir"], "command": argv}

    config = resolve_config()
    validated = validate_inputs(config)
    curated = curate(config)
    gate = quality_gate(config)
    published = publish(config, curated)
    validated >> curated >> gate >> published
    train(config, published)
