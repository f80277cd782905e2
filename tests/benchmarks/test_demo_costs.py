"""The demo-cost benchmarks: stage attribution of sandbox entries, the row comparison on a real
curate output, the fair-share subset and its busy processes."""

from __future__ import annotations

import json
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psutil
import pyarrow.parquet as pq
import pytest

from benchmarks import demo_overlap, demo_rows
from benchmarks.demo_costs import Meter, demo_argv, measure
from benchmarks.fair_share import Busy, settle, subset

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


class Backend:
    """Stands in for a sandbox's entry points only in what Meter reads: the call itself."""

    def __init__(self) -> None:
        self.calls = 0

    def run(self, *args: Any) -> str:
        self.calls += 1
        return "ran"


def run_gates(backend: Backend) -> str:  # named like the stage function the Meter looks for
    return backend.run("x")


def measure_strength(backend: Backend) -> list[str]:
    with ThreadPoolExecutor(2) as pool:  # the detectors judge mutants from a pool
        return list(pool.map(lambda _: backend.run("y"), range(3)))


def test_meter_counts_entries_by_the_stage_on_the_stack_and_across_pools() -> None:
    meter = Meter()
    backend = meter.wrap(Backend())
    submit = ThreadPoolExecutor.submit
    try:
        meter.carry_into_pools()
        assert run_gates(backend) == "ran"
        assert measure_strength(backend) == ["ran"] * 3
        backend.run("z")
    finally:
        ThreadPoolExecutor.submit = submit  # type: ignore[method-assign]
    assert backend.calls == 5
    assert dict(meter.entries) == {"Gates": 1, "TestStrength": 3, "other": 1}
    assert all(v >= 0 for v in meter.entry_wall.values())


def test_demo_argv_is_the_makefile_command() -> None:
    makefile = (EXAMPLES.parent / "Makefile").read_text()
    argv = demo_argv(Path("D"), Path("O"), [])
    assert argv[:4] == ["curate", "--input", "examples/tasks", "D/swebench.jsonl"]
    assert "--samples 4" in makefile and argv[argv.index("--samples") + 1] == "4"
    assert argv[argv.index("--snapshot-store") + 1] == "D/snapshots"
    assert "--snapshot-store" not in demo_argv(None, Path("O"), [])


def test_subset_keeps_valid_records_only(tmp_path: Path) -> None:
    n = subset(EXAMPLES / "tasks", tmp_path, 1)
    files = sorted(tmp_path.glob("*.jsonl"))
    assert n == len(files) >= 5
    for f in files:
        (line,) = f.read_text().splitlines()
        assert json.loads(line)["id"]


def test_busy_processes_run_and_are_stopped() -> None:
    with Busy(2, limit=60) as busy:
        time.sleep(0.5)
        cpu = [psutil.Process(p.pid).cpu_times().user for p in busy.procs]
        assert all(p.poll() is None for p in busy.procs)
    assert all(c > 0 for c in cpu)
    assert all(p.returncode is not None for p in busy.procs)


@pytest.mark.slow
def test_a_measured_run_and_its_rows(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    sql = [ln for ln in (EXAMPLES / "tasks" / "sql.jsonl").read_text().splitlines()][:1]
    (tasks / "sql.jsonl").write_text("\n".join(sql) + "\n")
    out = tmp_path / "out"
    replay = ["--sampler", "replay", "--replay", str(EXAMPLES / "replay" / "completions.jsonl")]
    run = measure(None, out, replay, str(tasks))
    assert run["rc"] == 0
    before = demo_overlap.one("bundle", None, tmp_path / "bundle", str(tasks), replay)
    assert before["way"] == "bundle" and before["stage_s"]["Gates"] > 0  # the baseline way
    assert demo_rows.compare(out, tmp_path / "bundle", decisions_only=False) == []
    assert run["entries"].get("Gates", 0) >= 1  # SQL: the verifier's worker, started once
    assert run["stage_s"]["Gates"] > 0 and run["tree_cpu_s"] > 0
    assert run["thread_cpu_s"]["GatesFn"] > 0

    assert demo_rows.compare(out, out, decisions_only=False) == []
    other = tmp_path / "other"
    shutil.copytree(out, other)
    kept = demo_rows.rows(out, "tasks")
    rejected = sorted((other / "rejected").rglob("*.parquet"))
    assert kept or rejected
    if rejected:  # another reason for one rejected task must show
        table = pq.read_table(rejected[0])
        reasons = table.column("reason").to_pylist()
        reasons[0] = "changed.reason"
        table = table.set_column(table.schema.get_field_index("reason"), "reason", [reasons])
        pq.write_table(table, rejected[0])
    else:  # a kept task missing must show
        for f in (other / "tasks").rglob("*.parquet"):
            f.unlink()
    diffs = demo_rows.compare(out, other, decisions_only=True)
    assert len(diffs) == 1, diffs
    assert demo_rows.main([str(out), str(other)]) == 1
    assert demo_rows.main([str(out), str(out)]) == 0


def test_settle_waits_for_the_load_only_while_it_is_above_the_cores() -> None:
    load, waited = settle(10_000, most_s=5.0)
    assert waited < 1.0 and load >= 0  # within the cores already: no wait
    load, waited = settle(-1, most_s=0.3, poll_s=0.05)  # never within: gives up at most_s
    assert 0.3 <= waited < 2.0
