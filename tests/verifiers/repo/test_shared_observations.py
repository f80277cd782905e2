"""The reference's probe runs, shared between test strength and the ambiguity check."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from tasksieve.verifiers.families.repo.differ import RepoDiffer
from tasksieve.verifiers.families.repo.snapshots import SnapshotStore
from tasksieve.verifiers.families.repo.verifier import RepoVerifier
from tasksieve.verifiers.reliability import shared
from tasksieve.verifiers.reliability.ambiguity import AmbiguityConfig, measure_ambiguity
from tasksieve.verifiers.reliability.strength import StrengthConfig, measure_strength
from tasksieve.verifiers.sandbox.base import Sandbox
from tests.verifiers.repo.repo_fixture import REFERENCE, build_repo, make_task
from tests.verifiers.repo.test_differ import MORE_TESTS, WEAK_TESTS


def _stable(report: object) -> dict[str, object]:
    out = dataclasses.asdict(report)  # type: ignore[call-overload]
    out.pop("duration_s")
    return dict(out)


def test_the_ambiguity_check_reuses_the_references_probe_run_with_the_same_report(
    sandbox: Sandbox, repo_verifier: RepoVerifier, repo_store: SnapshotStore, tmp_path: Path
) -> None:
    tree = build_repo(tmp_path, tests=WEAK_TESTS, extra={"tests/test_more.py": MORE_TESTS})
    task = make_task(repo_store, tree, f2p=["tests/test_ops.py::test_sub_is_not_a_sum"], p2p=[])
    differ = RepoDiffer(str(repo_store.root))
    other = REFERENCE.replace("+    return a - b", "+    return None")
    amb = AmbiguityConfig()
    shared.clear()
    try:
        strength = measure_strength(
            task,
            repo_verifier,
            differ,
            sandbox,
            StrengthConfig(max_mutants=4, workers=2),
        )
        assert strength.survived >= 1  # the reference was observed beside the survivors
        assert shared.STATS == {"reused": 0, "observed": 1}
        warm = measure_ambiguity(task, [(0, other)], differ, sandbox, amb)
        assert shared.STATS == {"reused": 1, "observed": 1}  # no second run of the reference
        shared.clear()
        cold = measure_ambiguity(task, [(0, other)], differ, sandbox, amb)
        assert shared.STATS == {"reused": 0, "observed": 1}
    finally:
        shared.clear()
    assert warm.outcome(amb) == "ambiguous"
    assert _stable(warm) == _stable(cold)
