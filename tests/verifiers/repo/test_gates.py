"""The gates on repo tasks: snapshot, test ids, the empty patch test by test, flaky tests."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tasksieve.schemas import TaskRecord
from tasksieve.transforms.reliability.gates import GatesConfig, run_gates
from tasksieve.verifiers.families.repo.snapshots import SnapshotStore
from tasksieve.verifiers.families.repo.verifier import RepoVerifier
from tests.transforms.add_task import item_of
from tests.verifiers.repo.repo_fixture import TESTS, build_repo, make_task

CFG = GatesConfig(reference_runs=2)


def _gate(verifier: RepoVerifier, task: TaskRecord, cfg: GatesConfig = CFG) -> tuple[str, str]:
    results, reason = run_gates(item_of(task), verifier, cfg)
    failed = [r.detail for r in results if not r.passed]
    return reason, failed[0] if failed else ""


def test_a_good_task_passes_every_gate(repo_verifier: RepoVerifier, repo_task: TaskRecord) -> None:
    assert _gate(repo_verifier, repo_task) == ("", "")


def test_missing_snapshot_names_task_and_store(
    sandbox: object, repo_task: TaskRecord, tmp_path: Path
) -> None:
    verifier = RepoVerifier(sandbox, SnapshotStore(tmp_path / "empty"))  # type: ignore[arg-type]
    reason, detail = _gate(verifier, repo_task)
    assert reason == "repo.snapshot"
    assert repo_task.id in detail and "is not in the store" in detail


def test_no_store_says_how_to_give_one(sandbox: object, repo_task: TaskRecord) -> None:
    reason, detail = _gate(RepoVerifier(sandbox, None), repo_task)  # type: ignore[arg-type]
    assert reason == "repo.snapshot" and "--snapshot-store" in detail


def test_altered_snapshot_is_refused(
    sandbox: object, repo_task: TaskRecord, tmp_path: Path
) -> None:
    store = SnapshotStore(tmp_path / "store")
    tree = build_repo(tmp_path / "repo")
    ref = store.put(tree)
    assert ref == repo_task.verifier.snapshot  # type: ignore[union-attr]
    stored = store.root / ref.split(":", 1)[1] / "mathlib" / "ops.py"
    stored.chmod(0o644)
    stored.write_text("def sub(a, b):\n    return a - b\n")
    reason, detail = _gate(RepoVerifier(sandbox, store), repo_task)  # type: ignore[arg-type]
    assert reason == "repo.snapshot" and "does not match its hash" in detail
    shutil.rmtree(store.root, ignore_errors=True)


@pytest.mark.parametrize(
    ("f2p", "p2p", "reason", "named"),
    [
        (
            ["tests/test_ops.py::test_sub", "tests/test_ops.py::test_nope"],
            [],
            "repo.tests_missing",
            "test_nope",
        ),
        (
            ["tests/test_ops.py::test_sub", "tests/test_none.py::test_x"],
            [],
            "repo.tests_missing",
            "test_none.py",
        ),
        (
            ["tests/test_ops.py::test_sub", "tests/test_ops.py::test_add"],
            [],
            "repo.fail_to_pass_passes_before",
            "test_add",
        ),
        (
            ["tests/test_ops.py::test_sub"],
            ["tests/test_ops.py::test_sub_negative"],
            "repo.pass_to_pass_fails_before",
            "test_sub_negative",
        ),
    ],
)
def test_bad_test_selection_is_named(
    f2p: list[str],
    p2p: list[str],
    reason: str,
    named: str,
    repo_verifier: RepoVerifier,
    repo_store: SnapshotStore,
    tmp_path: Path,
) -> None:
    task = make_task(repo_store, build_repo(tmp_path), f2p=f2p, p2p=p2p)
    got, detail = _gate(repo_verifier, task)
    assert got == reason, detail
    assert named in detail


FLAKY_TESTS = (
    TESTS
    + """

def test_coin():
    import os
    assert os.urandom(1)[0] < 128
"""
)


def test_a_flaky_test_is_named(
    repo_verifier: RepoVerifier, repo_store: SnapshotStore, tmp_path: Path
) -> None:
    task = make_task(
        repo_store,
        build_repo(tmp_path, tests=FLAKY_TESTS),
        p2p=["tests/test_ops.py::test_add", "tests/test_ops.py::test_coin"],
    )
    for _ in range(4):  # 6 runs agree by chance with p = 1/32; four tries leave p ~ 1e-6
        reason, detail = _gate(repo_verifier, task, GatesConfig(reference_runs=6))
        if reason == "gate.reference_flaky":
            break
    assert reason == "gate.reference_flaky", detail
    assert (
        "flaky tests (outcome differs between runs): pass_to_pass:tests/test_ops.py::test_coin"
        in detail
    )
