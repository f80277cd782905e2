"""Issue 24's cheats on both of the repo verifier's paths: a solution that edits the tests,
deletes them or writes outside the repository does not pass, whether the verifier runs packed
(input files copied into the run) or in a copy-on-write workspace. The fix itself, sent
alongside an edit of the tests, still passes on both (the tests were restored, not ignored).
"""

from __future__ import annotations

import copy
import dataclasses

import pytest

from tasksieve.schemas import TaskRecord
from tasksieve.verifiers.families.repo.snapshots import SnapshotStore
from tasksieve.verifiers.families.repo.verifier import RepoVerifier
from tasksieve.verifiers.sandbox.process.sandbox import ProcessSandbox
from tests.verifiers.repo.repo_fixture import (
    EDITED_TESTS,
    OPS_BUGGY,
    OPS_FIXED,
    REFERENCE,
    TESTS,
    file_diff,
)

CHEATS = {
    "edits the tests": file_diff("tests/test_ops.py", TESTS, EDITED_TESTS),
    "deletes the tests": file_diff("tests/test_ops.py", TESTS, None),
    "writes outside the repository": file_diff("../outside.py", None, "x = 1\n"),
    "writes to an absolute path": file_diff("mathlib/ops.py", OPS_BUGGY, OPS_FIXED).replace(
        "b/mathlib/ops.py", "/tmp/ops.py"
    ),
}


@pytest.fixture(scope="module", params=["packed", "workspace"])
def path_verifier(
    request: pytest.FixtureRequest, sandbox: ProcessSandbox, repo_store: SnapshotStore
) -> RepoVerifier:
    if not sandbox.capabilities.workspaces:
        pytest.skip("the process sandbox opens no workspaces here")
    box = sandbox
    if request.param == "packed":  # the same backend, seen as one that opens no workspaces
        box = copy.copy(sandbox)
        box.capabilities = dataclasses.replace(sandbox.capabilities, workspaces=False)
    return RepoVerifier(box, repo_store)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CHEATS))
def test_a_cheat_does_not_pass_on_either_path(
    name: str, path_verifier: RepoVerifier, repo_task: TaskRecord
) -> None:
    v = path_verifier.verify(repo_task, CHEATS[name])
    assert v.status not in ("pass", "infra_error"), (name, v.status, v.detail)


def test_the_fix_with_edited_tests_passes_on_either_path(
    path_verifier: RepoVerifier, repo_task: TaskRecord
) -> None:
    v = path_verifier.verify(repo_task, REFERENCE + CHEATS["edits the tests"])
    assert v.status == "pass", v.detail
    assert "restored from the snapshot: tests/test_ops.py" in v.detail
