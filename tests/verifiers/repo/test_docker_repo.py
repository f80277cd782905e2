"""The repo verifier's packed path on the docker backend (its image has no pytest: the
environment is built on the host from a local wheelhouse and sent with each run)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tasksieve.schemas import TaskRecord
from tasksieve.verifiers.families.repo.snapshots import SnapshotStore
from tasksieve.verifiers.families.repo.verifier import RepoVerifier
from tests.verifiers.repo.repo_fixture import EDITED_TESTS, TESTS, build_repo, file_diff, make_task
from tests.verifiers.repo.wheels import wheelhouse

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.fixture(scope="module")
def docker_repo(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[RepoVerifier, TaskRecord]]:
    try:
        from tasksieve.verifiers.sandbox.docker.sandbox import DockerSandbox

        sb = DockerSandbox(pool_size=1)
    except (ImportError, RuntimeError) as e:  # no SDK, engine or image: the message says
        pytest.skip(str(e))
    root = tmp_path_factory.mktemp("docker-repo")
    mp = pytest.MonkeyPatch()
    mp.setenv("PIP_NO_INDEX", "1")
    mp.setenv("PIP_FIND_LINKS", str(wheelhouse(["pytest"], root / "wheels")))
    store = SnapshotStore(root / "store")
    task = make_task(store, build_repo(root / "repo"))
    verifier = RepoVerifier(sb, store)
    assert verifier.task_problem(task) is None  # builds the environment once, here
    mp.undo()
    yield verifier, task
    sb.close()


@pytest.mark.parametrize(
    ("solution", "status"),
    [
        ("reference", "pass"),
        ("", "fail"),
        (file_diff("tests/test_ops.py", TESTS, EDITED_TESTS), "fail"),
    ],
)
def test_docker_verdicts(
    docker_repo: tuple[RepoVerifier, TaskRecord], solution: str, status: str
) -> None:
    verifier, task = docker_repo
    text = task.reference_solution if solution == "reference" else solution
    v = verifier.verify(task, text)
    assert v.status == status, v.detail
