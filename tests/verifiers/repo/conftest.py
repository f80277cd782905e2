"""Fixtures of the repo family's tests: one store, one repository, one verifier per session."""

from __future__ import annotations

from pathlib import Path

import pytest

from tasksieve.schemas import TaskRecord
from tasksieve.verifiers.families.repo.snapshots import SnapshotStore
from tasksieve.verifiers.families.repo.verifier import RepoVerifier
from tasksieve.verifiers.sandbox.process.sandbox import ProcessSandbox
from tests.verifiers.repo.repo_fixture import build_repo, make_task


@pytest.fixture(scope="session")
def repo_store(tmp_path_factory: pytest.TempPathFactory) -> SnapshotStore:
    return SnapshotStore(tmp_path_factory.mktemp("store"))


@pytest.fixture(scope="session")
def repo_task(tmp_path_factory: pytest.TempPathFactory, repo_store: SnapshotStore) -> TaskRecord:
    tree = build_repo(Path(tmp_path_factory.mktemp("mathlib")))
    return make_task(repo_store, tree)


@pytest.fixture(scope="session")
def repo_verifier(sandbox: ProcessSandbox, repo_store: SnapshotStore) -> RepoVerifier:
    return RepoVerifier(sandbox, repo_store)
