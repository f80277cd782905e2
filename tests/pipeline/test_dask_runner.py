"""curate on Beam's Dask runner against a real dask.distributed cluster gives the in-memory rows.

The module starts one scheduler and two worker processes on loopback (``local_dask``), runs
the same small input as tests/pipeline/test_runners.py (replay sampler, detectors off) on the
in-memory DirectRunner and on the cluster, and compares the rows of tasks/, rejected/ and
rollouts/ (run ids, durations and latencies aside), the conservation check and where the
sandbox stages ran. When the block ends every process the fixture started is gone.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tasksieve.pipeline.curate.local_dask import DaskCluster, local_dask
from tests.pipeline.test_runners import PICKED, _curate, _inputs, _rows

if not os.environ.get("CI"):  # CI installs the dask extra (make setup): there it must run
    pytest.importorskip("dask.distributed", reason="needs the dask extra")

pytestmark = pytest.mark.slow


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture(scope="module")
def cluster() -> Iterator[DaskCluster]:
    with local_dask(workers=2) as c:
        yield c
    assert not [p for p in c.worker_pids if _alive(p)], "worker processes outlived the cluster"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, cluster: DaskCluster) -> tuple[Path, Path]:
    inputs = _inputs(tmp_path_factory.mktemp("dask") / "in")
    _curate(inputs, inputs.parent / "in_memory")
    _curate(inputs, inputs.parent / "dask", *cluster.beam_args())
    return inputs.parent / "in_memory", inputs.parent / "dask"


@pytest.mark.parametrize("sub", ["tasks", "rejected", "rollouts"])
def test_dask_cluster_writes_the_in_memory_rows(runs: tuple[Path, Path], sub: str) -> None:
    in_memory, dask = runs
    assert _rows(in_memory, sub), sub  # something to compare
    assert _rows(dask, sub) == _rows(in_memory, sub)


def test_dask_run_kept_and_rejected_what_the_baseline_did(runs: tuple[Path, Path]) -> None:
    base, dask = (json.loads((r / "manifest.json").read_text()) for r in runs)
    assert dask["counts"] == base["counts"]
    assert dask["rejected_by_reason"] == base["rejected_by_reason"]
    assert dask["counts"]["input"] == sum(len(ids) for ids in PICKED.values())
    assert dask["runner"] == {
        "runner": "DaskRunner",
        "counters": "committed",
        "conservation": "exact",
    }


def test_sandbox_stages_ran_in_the_cluster_workers(
    runs: tuple[Path, Path], cluster: DaskCluster
) -> None:
    used = json.loads((runs[1] / "manifest.json").read_text())["sandbox"]["used_by_workers"]
    assert used and 1 <= sum(u["processes"] for u in used) <= len(cluster.worker_pids), used


def _loaded() -> dict[str, bool]:
    return {m: m in sys.modules for m in ("apache_beam.ml.inference.base", "torch")}


def test_the_cluster_workers_ran_inference_without_loading_torch(
    runs: tuple[Path, Path], cluster: DaskCluster
) -> None:
    from dask.distributed import Client

    with Client(cluster.address, timeout=60) as client:
        loaded = list(client.run(_loaded).values())
    assert any(w["apache_beam.ml.inference.base"] for w in loaded), loaded  # RunInference ran
    assert not any(w["torch"] for w in loaded), loaded
