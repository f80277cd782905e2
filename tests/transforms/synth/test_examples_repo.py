"""The shipped repo tasks: valid, their snapshots present and intact, their patches right."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tasksieve.schemas import RepoSpec, TaskRecord
from tasksieve.transforms.algorithms.textsim import shingles
from tasksieve.verifiers.families.repo.snapshots import SnapshotStore, tree_digest
from tasksieve.verifiers.families.repo.suite import run_suite
from tasksieve.verifiers.sandbox.base import Sandbox

ROOT = Path(__file__).resolve().parents[3]
TASKS = ROOT / "examples" / "tasks" / "repo.jsonl"
STORE = SnapshotStore(ROOT / "examples" / "snapshots")
REPLAY = ROOT / "examples" / "replay" / "completions.jsonl"


def _tasks() -> list[TaskRecord]:
    return [TaskRecord.model_validate_json(ln) for ln in TASKS.read_text().splitlines() if ln]


def _spec(t: TaskRecord) -> RepoSpec:
    assert isinstance(t.verifier, RepoSpec)
    return t.verifier


def _one_per_package() -> list[TaskRecord]:
    seen: dict[str, TaskRecord] = {}
    for t in _tasks():
        seen.setdefault(t.source.dataset, t)
    return list(seen.values())


def test_at_least_30_tasks_from_3_packages() -> None:
    tasks = _tasks()
    assert len(tasks) >= 30 and len({t.id for t in tasks}) == len(tasks)
    assert len({t.source.dataset for t in tasks}) >= 3
    assert all(t.family == "repo" and t.source.license == "MIT" for t in tasks)


def test_every_snapshot_is_stored_intact_with_its_license() -> None:
    refs = {_spec(t).snapshot for t in _tasks()}
    for ref in refs:
        tree = STORE.path(ref)  # raises when missing or altered
        assert tree_digest(tree) == ref and (tree / "LICENSE").is_file()
    stored = {f"sha256:{p.name}" for p in STORE.root.iterdir() if p.is_dir()}
    assert stored == refs  # nothing stale left in the store


def test_replay_rows_name_shipped_tasks_right_and_wrong() -> None:
    ids = {t.id: t for t in _tasks()}
    rows = [json.loads(ln) for ln in REPLAY.read_text().splitlines() if ln.strip()]
    ours = [r for r in rows if r["task_id"].startswith("repo.")]
    assert len(ours) >= 12 and all(r["task_id"] in ids for r in ours)
    right = [r for r in ours if ids[r["task_id"]].reference_solution in r["completion"]]
    assert 0 < len(right) < len(ours)


@pytest.mark.slow
@pytest.mark.parametrize("task", _one_per_package(), ids=lambda t: t.id)
def test_reference_patch_turns_fail_to_pass_green(
    task: TaskRecord, sandbox: Sandbox, tmp_path: Path
) -> None:
    spec = _spec(task)
    work = tmp_path / "repo"
    shutil.copytree(STORE.path(spec.snapshot), work)
    for p in [work, *work.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)
    ids = [*spec.fail_to_pass, *spec.pass_to_pass]
    before = run_suite(sandbox, work, ids=ids, test_args=spec.test_args)
    assert all(before.outcomes[i] != "passed" for i in spec.fail_to_pass)
    assert all(before.outcomes[i] == "passed" for i in spec.pass_to_pass)
    proc = subprocess.run(["patch", "-p1", "-s"], cwd=work, input=task.reference_solution.encode())
    assert proc.returncode == 0
    after = run_suite(sandbox, work, ids=ids, test_args=spec.test_args)
    assert set(after.outcomes.values()) == {"passed"}


def test_statements_are_not_near_duplicates_at_the_curate_threshold() -> None:
    sh = [(t.id, shingles(t.prompt)) for t in _tasks()]
    for i, (a, sa) in enumerate(sh):
        for b, sb in sh[i + 1 :]:
            assert len(sa & sb) / len(sa | sb) < 0.8, (a, b)
