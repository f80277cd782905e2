"""The repo verifier's workspace path (``Capabilities.workspaces``) and ``verify_workspace``.

These run on a backend that opens copy-on-write workspaces; on one that does not, they skip
saying so (the packed path is tested in test_verifier.py on every backend).
"""

from __future__ import annotations

import pytest

from tasksieve.schemas import TaskRecord
from tasksieve.verifiers.families.repo.snapshots import SnapshotStore
from tasksieve.verifiers.families.repo.verifier import RepoVerifier
from tasksieve.verifiers.sandbox.workspace import WorkspaceSpec
from tests.verifiers.repo.repo_fixture import EDITED_TESTS, OPS_FIXED, TESTS, file_diff


@pytest.fixture(scope="module")
def ws_verifier(sandbox: object, repo_store: SnapshotStore) -> RepoVerifier:
    if not sandbox.capabilities.workspaces:  # type: ignore[attr-defined]
        pytest.skip(f"the {sandbox.name} sandbox opens no workspaces here")  # type: ignore[attr-defined]
    return RepoVerifier(sandbox, repo_store)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("solution", "status"),
    [
        ("reference", "pass"),
        ("", "fail"),
        (file_diff("tests/test_ops.py", TESTS, EDITED_TESTS), "fail"),
    ],
)
def test_workspace_verdicts(
    ws_verifier: RepoVerifier, repo_task: TaskRecord, solution: str, status: str
) -> None:
    text = repo_task.reference_solution if solution == "reference" else solution
    v = ws_verifier.verify(repo_task, text)
    assert v.status == status, v.detail


@pytest.mark.parametrize(
    ("edits", "status"),
    [
        ({"mathlib/ops.py": OPS_FIXED, "tests/test_ops.py": EDITED_TESTS}, "pass"),
        (
            {"tests/test_ops.py": EDITED_TESTS, "conftest.py": "collect_ignore = ['tests']\n"},
            "fail",
        ),
    ],
)
def test_an_agents_final_workspace_is_judged_by_its_diff(
    ws_verifier: RepoVerifier,
    repo_task: TaskRecord,
    repo_store: SnapshotStore,
    edits: dict[str, str],
    status: str,
) -> None:
    tree = repo_store.path(repo_task.verifier.snapshot)  # type: ignore[union-attr]
    ws = ws_verifier.sandbox.open_workspace(WorkspaceSpec(snapshot=str(tree)))
    try:
        for path, text in edits.items():
            ws.write_file(path, text.encode())
        v = ws_verifier.verify_workspace(repo_task, ws)
    finally:
        ws.close()
    assert v.status == status, v.detail
