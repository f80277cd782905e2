"""The curate pipeline on real runner paths gives the in-memory run's outputs.

Three runs of the same small input (replay sampler, detectors off): the in-memory
DirectRunner (the baseline), the DirectRunner's multi-process mode (two SDK worker
processes) and the PortableRunner against Beam's Python job service with an external worker
pool (separate SDK worker processes, the job API Flink, Spark and Dataflow speak). Rows of
tasks/, rejected/ and rollouts/ are compared without run ids, durations and latencies.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tasksieve.pipeline.cli import main
from tasksieve.pipeline.curate.local_portable import PortableEndpoints, local_portable
from tasksieve.transforms.runtime import worker_sandbox
from tests.curate_flags import FAST

ROOT = Path(__file__).resolve().parents[2]
REPLAY = ROOT / "examples" / "replay" / "completions.jsonl"
PICKED = {  # kept, filtered, and rejected by validate, decontamination and gates
    "code.jsonl": ("code.add", "code.fizzbuzz_list", "code.flatten"),
    "sql.jsonl": ("sql.revenue_per_customer",),
    "problems.jsonl": ("code.missing_prompt", "code.malformed_json", "code.close_pair"),
}
VOLATILE = {"run_id", "duration_s", "latency_s", "runtime_ratio", "cpu_s"}
MULTI_PROCESS = ("--direct_running_mode=multi_processing", "--direct_num_workers=2")

pytestmark = pytest.mark.slow


def _inputs(root: Path) -> Path:
    """A few example tasks per file, copied line for line (malformed lines included)."""
    root.mkdir()
    for name, ids in PICKED.items():
        lines = (ROOT / "examples" / "tasks" / name).read_text().splitlines(keepends=True)
        picked = [line for line in lines if any(f'"{i}"' in line for i in ids)]
        assert len(picked) == len(ids), (name, picked)
        (root / name).write_text("".join(picked))
    return root


def _curate(inputs: Path, out: Path, *beam_args: str) -> dict[str, Any]:
    argv = ["curate", "--input", str(inputs), "--output", str(out), "--quiet"]
    argv += ["--sampler", "replay", "--replay", str(REPLAY), "--samples", "4", *FAST]
    assert main([*argv, *beam_args]) == 0
    manifest: dict[str, Any] = json.loads((out / "manifest.json").read_text())
    return manifest


def _stable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


def _rows(out: Path, sub: str) -> list[str]:
    rows: list[str] = []
    for f in sorted((out / sub).rglob("*.parquet")):
        for row in pq.read_table(f).to_pylist():
            rows.append(json.dumps(_stable(row), sort_keys=True, default=str))
    return sorted(rows)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _inputs(tmp_path_factory.mktemp("runners") / "in")


@pytest.fixture(scope="module")
def in_memory(inputs: Path) -> Path:
    out = inputs.parent / "in_memory"
    _curate(inputs, out)
    return out


@pytest.fixture(scope="module")
def job_service() -> Iterator[PortableEndpoints]:
    """One job service and worker pool shared by the portable runs of this module."""
    with local_portable() as endpoints:
        yield endpoints


@pytest.fixture(scope="module")
def portable(inputs: Path, job_service: PortableEndpoints) -> tuple[Path, int, str]:
    """The portable run, how many sandbox counters this (driver) process recorded during it,
    and the worker pool's log."""
    out = inputs.parent / "portable"
    before = len(worker_sandbox._COUNTED)
    _curate(inputs, out, *job_service.beam_args())
    return out, len(worker_sandbox._COUNTED) - before, job_service.logs[1].read_text()


@pytest.fixture(scope="module")
def multi_process(inputs: Path) -> Path:
    out = inputs.parent / "multi_process"
    _curate(inputs, out, *MULTI_PROCESS)
    return out


def test_the_baseline_keeps_filters_and_rejects(in_memory: Path) -> None:
    manifest = json.loads((in_memory / "manifest.json").read_text())
    assert manifest["counts"]["kept"] >= 2, manifest["counts"]
    assert {"filter.too_easy", "validate.schema", "decontam.humaneval"} <= set(
        manifest["rejected_by_reason"]
    ), manifest["rejected_by_reason"]


@pytest.mark.parametrize("sub", ["tasks", "rejected", "rollouts"])
def test_portable_runner_writes_the_in_memory_rows(
    in_memory: Path, portable: tuple[Path, int, str], sub: str
) -> None:
    assert _rows(portable[0], sub) == _rows(in_memory, sub)


@pytest.mark.parametrize("sub", ["tasks", "rejected", "rollouts"])
def test_multi_process_direct_runner_writes_the_in_memory_rows(
    in_memory: Path, multi_process: Path, sub: str
) -> None:
    assert _rows(multi_process, sub) == _rows(in_memory, sub)


def test_portable_stages_ran_in_sdk_worker_processes(portable: tuple[Path, int, str]) -> None:
    out, counted_here, pool_log = portable
    used = json.loads((out / "manifest.json").read_text())["sandbox"]["used_by_workers"]
    assert counted_here == 0  # no sandbox stage ran in the driver process
    assert "Starting worker with command" in pool_log
    assert used and all(u["processes"] >= 1 for u in used), used
    started = pool_log.count("Starting worker with command")
    assert sum(u["processes"] for u in used) <= started, (used, started)


@pytest.mark.parametrize("run", ["in_memory", "portable", "multi_process"])
def test_conservation_used_committed_counters(run: str, request: pytest.FixtureRequest) -> None:
    got = request.getfixturevalue(run)
    out = got[0] if isinstance(got, tuple) else got
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["runner"]["counters"] == "committed", manifest["runner"]
    assert manifest["runner"]["conservation"] == "exact", manifest["runner"]
    assert manifest["counts"]["input"] == sum(len(ids) for ids in PICKED.values())


def test_multi_process_run_reports_at_most_one_sandbox_per_worker(multi_process: Path) -> None:
    used = json.loads((multi_process / "manifest.json").read_text())["sandbox"]["used_by_workers"]
    assert used and 1 <= sum(u["processes"] for u in used) <= 2, used


def test_in_memory_run_reports_one_sandbox_process(in_memory: Path) -> None:
    used = json.loads((in_memory / "manifest.json").read_text())["sandbox"]["used_by_workers"]
    assert [u["processes"] for u in used] == [1], used
