"""The CPU sampler's OpenMP wait policy and thread count."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tasksieve.transforms.samplers.hf import cgroup_cpu_quota, cpu_threads

ROOT = Path(__file__).resolve().parents[2]


def _policy_after(code: str, **env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    out = subprocess.run(
        [sys.executable, "-c", code + "\nimport os; print(os.environ.get('OMP_WAIT_POLICY', '-'))"],
        env={**clean, "PYTHONPATH": str(ROOT), **env},
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip().splitlines()[-1]


def test_importing_transforms_makes_openmp_waits_passive() -> None:
    assert _policy_after("import tasksieve.transforms.rollouts.rounds") == "PASSIVE"


def test_a_policy_the_user_set_is_kept() -> None:
    assert _policy_after("import transforms", OMP_WAIT_POLICY="ACTIVE") == "ACTIVE"


def test_nothing_is_set_once_torch_is_loaded() -> None:
    """Too late to matter: the sampler warns instead of pretending."""
    pytest.importorskip("torch")
    assert _policy_after("import torch\nimport transforms") == "-"


@pytest.mark.parametrize(
    ("text", "cpus"),
    [
        ("max 100000\n", None),
        ("200000 100000\n", 2.0),
        ("50000 100000\n", 0.5),
        ("150000 100000", 1.5),
        ("garbage", None),
        ("", None),
        ("100 0", None),
    ],
)
def test_cgroup_quota(tmp_path: Path, text: str, cpus: float | None) -> None:
    path = tmp_path / "cpu.max"
    path.write_text(text)
    assert cgroup_cpu_quota(str(path)) == cpus


def test_missing_cgroup_file_means_no_quota(tmp_path: Path) -> None:
    assert cgroup_cpu_quota(str(tmp_path / "absent")) is None


@pytest.mark.parametrize(("env", "threads"), [("3", 3), ("1", 1)])
def test_omp_num_threads_wins(monkeypatch: pytest.MonkeyPatch, env: str, threads: int) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", env)
    assert cpu_threads() == threads


def test_threads_never_exceed_the_cpus_this_process_may_use(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert 1 <= cpu_threads() <= len(os.sched_getaffinity(0))
