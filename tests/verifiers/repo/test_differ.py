"""Repo detectors: mutants of the reference patch, the repository's other tests as probes."""

from __future__ import annotations

from pathlib import Path

from tasksieve.schemas import TaskRecord
from tasksieve.verifiers.families.repo.differ import RepoDiffer, patch_mutants
from tasksieve.verifiers.families.repo.snapshots import SnapshotStore
from tasksieve.verifiers.families.repo.verifier import RepoVerifier
from tasksieve.verifiers.registry import get_differ
from tasksieve.verifiers.reliability.ambiguity import AmbiguityConfig, measure_ambiguity
from tasksieve.verifiers.reliability.strength import StrengthConfig, measure_strength
from tests.verifiers.repo.repo_fixture import REFERENCE, build_repo, make_task

WEAK_TESTS = """from mathlib.ops import sub


def test_sub_is_not_a_sum():
    assert sub(5, 3) != 8
"""
MORE_TESTS = """from mathlib.ops import sub


def test_sub_exact():
    assert sub(5, 3) == 2
"""


def test_mutants_change_only_added_lines_and_keep_the_hunks() -> None:
    made = patch_mutants(REFERENCE)
    assert {m.operator for m in made} >= {"py.return_value", "py.drop_statement"}
    for m in made:
        changed = [
            (a, b)
            for a, b in zip(REFERENCE.splitlines(), m.solution.splitlines(), strict=True)
            if a != b
        ]
        assert len(changed) == 1 and changed[0][0] == "+    return a - b", changed
        assert changed[0][1].startswith("+    ")


def test_get_differ_knows_repo(repo_store: SnapshotStore) -> None:
    assert get_differ("repo", str(repo_store.root)).family == "repo"


def test_strong_tests_kill_every_mutant(
    sandbox: object, repo_verifier: RepoVerifier, repo_task: TaskRecord, repo_store: SnapshotStore
) -> None:
    differ = RepoDiffer(str(repo_store.root))
    cfg = StrengthConfig(max_mutants=4, workers=2)
    report = measure_strength(repo_task, repo_verifier, differ, sandbox, cfg)  # type: ignore[arg-type]
    assert report.made >= 2 and report.killed == report.made and report.score == 1.0


def test_weak_tests_let_a_mutant_survive_shown_on_another_test_file(
    sandbox: object, repo_verifier: RepoVerifier, repo_store: SnapshotStore, tmp_path: Path
) -> None:
    tree = build_repo(tmp_path, tests=WEAK_TESTS, extra={"tests/test_more.py": MORE_TESTS})
    task = make_task(repo_store, tree, f2p=["tests/test_ops.py::test_sub_is_not_a_sum"], p2p=[])
    differ = RepoDiffer(str(repo_store.root))
    assert [p.payload for p in differ.probes(task, 10, 0)] == [
        "tests/test_more.py",
        "tests/test_ops.py",
    ]
    cfg = StrengthConfig(max_mutants=4, workers=2)
    report = measure_strength(task, repo_verifier, differ, sandbox, cfg)  # type: ignore[arg-type]
    assert report.survived >= 1, report
    survivor = report.survivors[0]
    assert survivor.probe == "tests/test_more.py"
    assert '"tests/test_more.py::test_sub_exact": "passed"' in survivor.reference_output
    assert '"tests/test_more.py::test_sub_exact": "failed"' in survivor.mutant_output


def test_passing_solutions_that_disagree_elsewhere_make_the_task_ambiguous(
    sandbox: object, repo_store: SnapshotStore, tmp_path: Path
) -> None:
    tree = build_repo(tmp_path, tests=WEAK_TESTS, extra={"tests/test_more.py": MORE_TESTS})
    task = make_task(repo_store, tree, f2p=["tests/test_ops.py::test_sub_is_not_a_sum"], p2p=[])
    other = REFERENCE.replace("+    return a - b", "+    return None")
    cfg = AmbiguityConfig()
    differ = RepoDiffer(str(repo_store.root))
    report = measure_ambiguity(task, [(0, other)], differ, sandbox, cfg)  # type: ignore[arg-type]
    assert report.outcome(cfg) == "ambiguous", report
    assert report.disagreements[0].probe == "tests/test_more.py"
