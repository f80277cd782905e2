"""Repo tasks on the ``remote`` backend: verified on this side, each run sent to the sandbox
service as files (``/run_code``), the environment built here from a local wheelhouse."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tasksieve.schemas import TaskRecord
from tasksieve.verifiers.families.repo.snapshots import SnapshotStore
from tasksieve.verifiers.families.repo.verifier import RepoVerifier
from tasksieve.verifiers.registry import get_verifier
from tasksieve.verifiers.remote import RemoteSandbox
from tests.service.servers import TOKEN, start_server
from tests.verifiers.repo.repo_fixture import EDITED_TESTS, TESTS, build_repo, file_diff, make_task
from tests.verifiers.repo.wheels import wheelhouse

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def remote_repo(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[RepoVerifier, TaskRecord]]:
    root: Path = tmp_path_factory.mktemp("remote-repo")
    srv = start_server(root, "--workers", "1")
    mp = pytest.MonkeyPatch()
    mp.setenv("TASKSIEVE_SERVICE_TOKEN", TOKEN)
    mp.setenv("PIP_NO_INDEX", "1")
    mp.setenv("PIP_FIND_LINKS", str(wheelhouse(["pytest"], root / "wheels")))
    sandbox = RemoteSandbox((srv.url,))
    store = SnapshotStore(root / "store")
    task = make_task(store, build_repo(root / "repo"))
    verifier = get_verifier("repo", sandbox, str(store.root))
    assert isinstance(verifier, RepoVerifier)  # not the service's whole-verification path
    assert verifier.task_problem(task) is None
    try:
        yield verifier, task
    finally:
        sandbox.close()
        srv.stop()
        mp.undo()


@pytest.mark.parametrize(
    ("solution", "status"),
    [
        ("reference", "pass"),
        ("", "fail"),
        (file_diff("tests/test_ops.py", TESTS, EDITED_TESTS), "fail"),
    ],
)
def test_remote_verdicts(
    remote_repo: tuple[RepoVerifier, TaskRecord], solution: str, status: str
) -> None:
    verifier, task = remote_repo
    text = task.reference_solution if solution == "reference" else solution
    v = verifier.verify(task, text)
    assert v.status == status, v.detail
