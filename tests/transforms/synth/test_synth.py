"""``synth repo`` end to end on a tiny project, through the real process sandbox and pytest."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tasksieve.pipeline.cli import main
from tasksieve.schemas import RepoSpec, TaskRecord
from tasksieve.transforms.samplers.config import SamplerConfig
from tasksieve.transforms.synth.project import load_project
from tasksieve.transforms.synth.repo import SynthConfig, SynthResult, candidates, synthesize
from tasksieve.transforms.synth.rewrite import refusal, rewrite_statements
from tasksieve.verifiers.families.repo.snapshots import SnapshotStore
from tasksieve.verifiers.families.repo.suite import run_suite
from tasksieve.verifiers.sandbox.base import Sandbox
from tests.transforms.synth.conftest import TESTS, write_project


@pytest.fixture(scope="module")
def made(
    tmp_path_factory: pytest.TempPathFactory, sandbox: Sandbox
) -> tuple[Path, SnapshotStore, SynthResult]:
    root = write_project(tmp_path_factory.mktemp("proj") / "mini-0.1")
    store = SnapshotStore(tmp_path_factory.mktemp("store"))
    result = synthesize(load_project(root), sandbox, store, SynthConfig(max_tasks=3, seed=1))
    return root, store, result


def _spec(task: TaskRecord) -> RepoSpec:
    assert isinstance(task.verifier, RepoSpec)
    return task.verifier


def test_tasks_are_made_with_both_lists(made: tuple[Path, SnapshotStore, SynthResult]) -> None:
    _root, store, result = made
    assert 1 <= len(result.tasks) <= 3 and result.baseline_tests == 5
    for t in result.tasks:
        spec = _spec(t)
        assert spec.fail_to_pass and spec.pass_to_pass
        assert not set(spec.fail_to_pass) & set(spec.pass_to_pass)
        assert spec.snapshot in store
        assert t.source.license == "MIT" and t.metadata["package"]["name"] == "mini"
        TaskRecord.model_validate_json(t.model_dump_json())


def test_statement_shows_the_failing_tests_never_the_bug(
    made: tuple[Path, SnapshotStore, SynthResult],
) -> None:
    for t in made[2].tasks:
        assert all(tid in t.prompt for tid in _spec(t).fail_to_pass)
        removed = [
            ln[1:].strip()
            for ln in t.reference_solution.splitlines()
            if ln.startswith("-") and not ln.startswith("---") and ln[1:].strip()
        ]
        shown = {ln.strip() for ln in t.prompt.splitlines()}
        assert removed and not any(line in shown for line in removed)
        assert "mini/calc.py" not in t.prompt and "@@" not in t.prompt


def test_snapshot_fails_and_reference_patch_fixes_it(
    made: tuple[Path, SnapshotStore, SynthResult], sandbox: Sandbox, tmp_path: Path
) -> None:
    root, store, result = made
    t = result.tasks[0]
    spec = _spec(t)
    work = tmp_path / "work"
    shutil.copytree(store.path(spec.snapshot), work)
    work.chmod(0o755)
    for p in work.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    ids = [*spec.fail_to_pass, *spec.pass_to_pass]
    before = run_suite(sandbox, work, ids=ids)
    assert {before.outcomes[i] for i in spec.fail_to_pass} <= {"failed", "error"}
    subprocess.run(
        ["patch", "-p1", "-s"], cwd=work, input=t.reference_solution.encode(), check=True
    )
    assert (work / "mini" / "calc.py").read_text() == (root / "mini" / "calc.py").read_text()
    after = run_suite(sandbox, work, ids=ids)
    assert set(after.outcomes.values()) == {"passed"}


def test_candidates_are_deterministic_for_a_seed(project: Path) -> None:
    proj = load_project(project)
    first = [(c.path, c.where) for c in candidates(proj, 7, 20)]
    assert first == [(c.path, c.where) for c in candidates(proj, 7, 20)]
    assert first != [(c.path, c.where) for c in candidates(proj, 8, 20)]


@pytest.mark.parametrize(
    "case, message",
    [
        ("no_tests", "no test files"),
        ("not_python", "no Python files"),
        ("failing", "fail before any change"),
        ("missing", "not a directory"),
    ],
)
def test_bad_projects_exit_2_with_a_clear_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str, message: str
) -> None:
    proj = tmp_path / "p"
    if case == "no_tests":
        write_project(proj)
        shutil.rmtree(proj / "tests")
    elif case == "not_python":
        proj.mkdir()
        (proj / "README").write_text("hello")
    elif case == "failing":
        write_project(proj, TESTS + "\n\ndef test_broken():\n    assert False\n")
    argv = ["synth", "repo", "--project", str(proj), "--output", str(tmp_path / "o.jsonl")]
    assert main([*argv, "--snapshot-store", str(tmp_path / "s"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_sampler_rewrite_is_used_only_when_it_hides_the_bug(
    made: tuple[Path, SnapshotStore, SynthResult], tmp_path: Path
) -> None:
    tasks = made[2].tasks
    issue = "Calling the package's function with ordinary input gives a wrong answer now."
    rows = [{"task_id": tasks[0].id, "completion": f"Here it is:\n\n```\n{issue}\n```\n"}]
    rows += [{"task_id": t.id, "completion": "```\nbroken\n```"} for t in tasks[1:]]
    replay = tmp_path / "replay.jsonl"
    replay.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = SamplerConfig(backend="replay", replay_path=str(replay), samples=1)
    out, done = rewrite_statements(tasks, cfg)
    assert done == 1 and out[0].prompt == issue + "\n"
    assert out[0].metadata["synth"]["evidence_statement"] == tasks[0].prompt
    assert all("refused: too short" in t.metadata["synth"]["statement"] for t in out[1:])
    bug = next(
        ln[1:]
        for ln in tasks[0].reference_solution.splitlines()
        if ln.startswith("-") and ln[1:4] != "-- "
    )
    assert refusal(tasks[0], issue + "\n" + bug + "\n") == "repeats the injected bug"
