"""Run Airflow's own CLI against a throwaway AIRFLOW_HOME (SQLite), in child processes.

Airflow is never imported into the pytest process: importing it reads and creates its home
directory and reconfigures logging, which must not leak into the other tests.
"""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DAGS = REPO / "airflow_dags"
DAG_ID = "tasksieve_curate"


def _missing() -> str | None:
    for dist in ("apache-airflow", "apache-airflow-providers-apache-beam", "great_expectations"):
        try:
            importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            return dist
    return None


_MISSING = _missing()
needs_airflow = pytest.mark.skipif(
    _MISSING is not None,
    reason=f"{_MISSING} is not installed: pip install -e '.[airflow]' (make setup does)",
)


def airflow_env(home: Path) -> dict[str, str]:
    """Environment for an Airflow child process: its home, this DAG folder, this checkout."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update(
        AIRFLOW_HOME=str(home),
        AIRFLOW__CORE__DAGS_FOLDER=str(DAGS),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        # The DAG's tasks start `python -m pipeline...`: they must import this checkout.
        PYTHONPATH=os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]),
    )
    return env


def run_python(code: str, *args: str, home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        env=airflow_env(home),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def run_airflow(*args: str, home: Path, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "airflow", *args],
        env=airflow_env(home),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
