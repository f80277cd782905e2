"""``/metrics`` exports what the fleet is watched and scaled by, in Prometheus text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.service.servers import Server

ROOT = Path(__file__).resolve().parents[2]
TASK = (ROOT / "examples" / "solutions" / "add.task.json").read_text()


@pytest.fixture(scope="module")
def metrics(server: Server) -> str:
    task = json.loads(TASK)
    assert (
        server.post("/verify", {"task": task, "solution": task["reference_solution"]}).status_code
        == 200
    )
    return server.get("/metrics").text


@pytest.mark.parametrize(
    "line",
    [
        "tasksieve_queue_depth ",
        "tasksieve_in_flight ",
        "tasksieve_sessions_alive ",
        'tasksieve_job_seconds_bucket{kind="verify",le="0.5"}',
        'tasksieve_jobs_total{kind="verify",outcome="ok"}',
        'tasksieve_verdicts_total{status="pass"}',
        "# TYPE tasksieve_infra_errors_total counter",
        "# TYPE tasksieve_rejected_total counter",
    ],
)
def test_metric_is_exported(metrics: str, line: str) -> None:
    assert any(m.startswith(line) for m in metrics.splitlines()), line
