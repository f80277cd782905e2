"""The repo verifier on the process sandbox: verdicts per test id, and solutions that cheat."""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path

import pytest

from tasksieve.schemas import TaskRecord
from tasksieve.verifiers.families.repo.snapshots import SnapshotStore
from tasksieve.verifiers.families.repo.verifier import RepoVerifier
from tests.verifiers.repo.repo_fixture import (
    EDITED_TESTS,
    F2P,
    OPS_BUGGY,
    OPS_FIXED,
    P2P,
    REFERENCE,
    TESTS,
    build_repo,
    file_diff,
    make_task,
)

FIX = REFERENCE
PLUGIN = """import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    rep.outcome = "passed"
"""


def test_reference_passes_with_a_check_per_test(
    repo_verifier: RepoVerifier, repo_task: TaskRecord
) -> None:
    v = repo_verifier.verify(repo_task, repo_task.reference_solution)
    assert v.status == "pass", v.detail
    assert (v.tests_passed, v.tests_total) == (4, 4)
    assert {c.name for c in v.checks} == {
        "fail_to_pass:tests/test_ops.py::test_sub",
        "fail_to_pass:tests/test_ops.py::test_sub_negative",
        "pass_to_pass:tests/test_ops.py::test_add",
        "pass_to_pass:tests/test_ops.py::test_mul",
    }


def test_empty_patch_fails_each_fail_to_pass(
    repo_verifier: RepoVerifier, repo_task: TaskRecord
) -> None:
    v = repo_verifier.verify(repo_task, "")
    assert v.status == "fail"
    assert {c.name: c.detail for c in v.checks if not c.passed} == {
        "fail_to_pass:tests/test_ops.py::test_sub": "failed",
        "fail_to_pass:tests/test_ops.py::test_sub_negative": "failed",
    }
    assert "fail_to_pass 0/2, pass_to_pass 2/2" in v.detail


def test_patch_that_does_not_apply_fails_with_the_hunk(
    repo_verifier: RepoVerifier, repo_task: TaskRecord
) -> None:
    stale = FIX.replace(" def sub(a, b):", " def subtract(a, b):")
    v = repo_verifier.verify(repo_task, stale)
    assert v.status == "fail"
    assert "patch does not apply" in v.detail and "mathlib/ops.py: hunk 1" in v.detail


FORGER = """import json, os, sys

path = os.environ.get("TASKSIEVE_OUTCOMES")
if path:
    with open(path, "a") as fh:
        for tid in [a for a in sys.argv if "::" in a] or IDS:
            for phase in ("setup", "call", "teardown"):
                fh.write(json.dumps({"id": tid, "phase": phase, "outcome": "passed"}) + "\\n")
os._exit(0)
""".replace("IDS", repr(F2P + P2P))
HACKS = {
    "edits the tests": file_diff("tests/test_ops.py", TESTS, EDITED_TESTS),
    "deletes the tests": file_diff("tests/test_ops.py", TESTS, None),
    "adds a conftest.py": file_diff(
        "conftest.py",
        None,
        "import pytest\n\n\ndef pytest_runtest_call(item):\n    pass\n" + PLUGIN,
    ),
    "adds a conftest.py under the package": file_diff("mathlib/conftest.py", None, PLUGIN),
    "adds a pytest.ini": file_diff("pytest.ini", None, "[pytest]\naddopts = -p mathlib.hack\n")
    + file_diff("mathlib/hack.py", None, PLUGIN),
    "adds an auto-loaded pytest plugin": file_diff("hack.py", None, PLUGIN)
    + file_diff(
        "hack-1.0.dist-info/METADATA", None, "Metadata-Version: 2.1\nName: hack\nVersion: 1.0\n"
    )
    + file_diff("hack-1.0.dist-info/entry_points.txt", None, "[pytest11]\nhack = hack\n"),
    "adds a .pth file": file_diff("mathlib.pth", None, "import mathlib.hack\n")
    + file_diff("mathlib/hack.py", None, "import os\nos._exit(0)\n"),
    "writes outside the workspace": file_diff("../outside.py", None, "x = 1\n"),
    "writes to an absolute path": file_diff("mathlib/ops.py", OPS_BUGGY, OPS_FIXED).replace(
        "b/mathlib/ops.py", "/tmp/ops.py"
    ),
    "exits before the tests report": file_diff(
        "mathlib/__init__.py", "", "import os\n\nos._exit(0)\n"
    ),
    "shadows pytest with a pytest.py": file_diff("pytest.py", None, FORGER),
    "forges the outcome file from the tests' imports": file_diff("mathlib/__init__.py", "", FORGER),
    "swallows the outcome plugin": file_diff(
        "mathlib/__init__.py",
        "",
        "import sys\n\nm = sys.modules.get('tasksieve_outcomes')\nif m:\n    m._sink = None\n",
    ),
}


@pytest.mark.parametrize("name", sorted(HACKS))
def test_a_solution_that_cheats_does_not_pass(
    name: str, repo_verifier: RepoVerifier, repo_task: TaskRecord
) -> None:
    v = repo_verifier.verify(repo_task, HACKS[name])
    assert v.status != "pass", (name, v.detail)
    assert v.status != "infra_error", (name, v.detail)


def test_the_fix_passes_even_with_edited_tests(
    repo_verifier: RepoVerifier, repo_task: TaskRecord
) -> None:
    v = repo_verifier.verify(repo_task, FIX + HACKS["edits the tests"])
    assert v.status == "pass", v.detail
    assert "restored from the snapshot: tests/test_ops.py" in v.detail


def test_a_solution_that_loops_times_out(
    repo_verifier: RepoVerifier, repo_store: SnapshotStore, tmp_path: Path
) -> None:
    task = make_task(repo_store, build_repo(tmp_path), timeout_s=2.0)
    loop = file_diff(
        "mathlib/ops.py",
        OPS_BUGGY,
        OPS_BUGGY.replace("return a + b\n\n\ndef mul", "while True:\n        pass\n\n\ndef mul"),
    )
    v = repo_verifier.verify(task, loop)
    assert v.status == "timeout", v.detail
    assert v.tests_passed < v.tests_total


def test_a_repository_over_the_packed_limit_is_rejected(
    sandbox: object, repo_task: TaskRecord, repo_store: SnapshotStore
) -> None:
    packed = copy.copy(sandbox)  # the packed path: a backend that opens no workspaces
    packed.capabilities = dataclasses.replace(sandbox.capabilities, workspaces=False)  # type: ignore[attr-defined]
    small = RepoVerifier(packed, repo_store, max_packed_bytes=100)  # type: ignore[arg-type]
    problem = small.task_problem(repo_task)
    assert problem is not None and problem.reason == "repo.too_large"
    assert repo_task.id in str(problem) and "workspaces" in str(problem)


def test_test_time_writes_reach_neither_the_store_nor_the_next_run(
    repo_verifier: RepoVerifier, repo_task: TaskRecord, repo_store: SnapshotStore
) -> None:
    stored = repo_store.path(repo_task.verifier.snapshot)  # type: ignore[union-attr]
    targets = [str(stored / "tests" / "test_ops.py"), "../snap/tests/test_ops.py"]
    vandal = "\n".join(
        [
            "for _p in " + repr(targets) + ":",
            "    try:",
            "        with open(_p, 'w') as _f:",
            "            _f.write('def test_sub():\\n    pass\\n')",
            "    except OSError:",
            "        pass",
            "",
        ]
    )
    v = repo_verifier.verify(repo_task, FIX + file_diff("mathlib/__init__.py", "", vandal))
    assert v.status == "pass", v.detail  # the fix is right; the writes went nowhere that counts
    assert SnapshotStore(repo_store.root).path(repo_task.verifier.snapshot) == stored  # type: ignore[union-attr]
    assert repo_verifier.verify(repo_task, "").status == "fail"
