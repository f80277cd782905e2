"""The ``.pre-commit-hooks.yaml`` hook: a valid manifest, the right files, and a real run.

The real run (``pre-commit run`` in a scratch git repository whose config points at a
committed snapshot of this checkout) installs this package and all its dependencies into a
fresh hook environment, which takes minutes, so it only runs when
``TASKSIEVE_TEST_PRECOMMIT=1`` is set.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = ROOT / ".pre-commit-hooks.yaml"
ADD_TASK = ROOT / "examples" / "solutions" / "add.task.json"
RUN_REAL = os.environ.get("TASKSIEVE_TEST_PRECOMMIT") == "1"


def hook() -> dict[str, object]:
    (only,) = [h for h in yaml.safe_load(MANIFEST.read_text()) if h["id"] == "tasksieve-validate"]
    return dict(only)


def test_manifest_passes_pre_commits_own_check() -> None:
    pytest.importorskip("pre_commit")
    proc = subprocess.run(
        [sys.executable, "-m", "pre_commit", "validate-manifest", str(MANIFEST)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_hook_is_a_python_hook_running_validate() -> None:
    h = hook()
    assert h["language"] == "python"
    assert h["entry"] == "tasksieve validate"


@pytest.mark.parametrize(
    "name,matched",
    [
        ("tasks/code.jsonl", True),
        ("tasks/code.jsonl.gz", True),
        ("one.json", True),
        ("shards/part-0.parquet", True),
        ("solution.py", False),
        ("notes.jsonl.bak", False),
        ("README.md", False),
    ],
)
def test_files_pattern(name: str, matched: bool) -> None:
    assert bool(re.search(str(hook()["files"]), name)) is matched


def _git(repo: Path, *args: str) -> str:
    proc = subprocess.run(
        ["git", *args], cwd=repo, check=True, capture_output=True, text=True, timeout=60
    )
    return proc.stdout


def _snapshot(dest: Path) -> Path:
    """This checkout's tracked files as they are now (edits included), committed afresh."""
    _git(dest, "init", "-q")
    for name in _git(ROOT, "ls-files", "-z").split("\0"):
        src = ROOT / name
        if name and src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    _git(dest, "add", "-A")
    _git(dest, "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-qm", "s")
    return dest


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A user repository whose config points at a snapshot of this one, and a hook store.

    ``pre-commit try-repo`` installs the hook into a new store on every call, so the
    module uses a real ``repo:`` entry (the snapshot's path and commit) and one store.
    """
    hooks = _snapshot(tmp_path_factory.mktemp("tasksieve"))
    rev = _git(hooks, "rev-parse", "HEAD").strip()
    repo = tmp_path_factory.mktemp("hooked")
    _git(repo, "init", "-q")
    config = {"repos": [{"repo": str(hooks), "rev": rev, "hooks": [{"id": "tasksieve-validate"}]}]}
    (repo / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config))
    shutil.copy(ADD_TASK, repo / "good.json")
    (repo / "bad.jsonl").write_text(json.dumps({"id": "x", "family": "code"}) + "\n")
    _git(repo, "add", ".")
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path_factory.mktemp("pre-commit-home"))}
    return repo, env


def _run_hook(
    scratch: tuple[Path, dict[str, str]], *files: str
) -> subprocess.CompletedProcess[str]:
    repo, env = scratch
    argv = ["run", "tasksieve-validate", "--files", *files]
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", *argv],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )


real_run = pytest.mark.skipif(
    not RUN_REAL,
    reason="installs tasksieve into a fresh pre-commit env (minutes); "
    "set TASKSIEVE_TEST_PRECOMMIT=1",
)
git_checkout = pytest.mark.skipif(not (ROOT / ".git").exists(), reason="needs a git checkout")


@pytest.mark.slow
@real_run
@git_checkout
def test_valid_file_passes_the_hook(scratch: tuple[Path, dict[str, str]]) -> None:
    proc = _run_hook(scratch, "good.json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Passed" in proc.stdout


@pytest.mark.slow
@real_run
@git_checkout
def test_invalid_file_fails_the_hook_with_file_line(scratch: tuple[Path, dict[str, str]]) -> None:
    proc = _run_hook(scratch, "good.json", "bad.jsonl")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "bad.jsonl:1: x: prompt: Field required" in proc.stdout
