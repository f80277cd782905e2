"""Environments: the fast path, a real offline build (pip from a local wheelhouse), failures."""

from __future__ import annotations

import os
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tasksieve.schemas.repo import RepoEnvironment
from tasksieve.transforms.reliability.gates import GatesConfig, run_gates
from tasksieve.verifiers.families.repo.environments import (
    MARKER,
    EnvironmentBuildError,
    build,
    resolve,
)
from tasksieve.verifiers.families.repo.snapshots import SnapshotStore
from tasksieve.verifiers.families.repo.verifier import RepoVerifier
from tests.transforms.add_task import item_of
from tests.verifiers.repo.repo_fixture import build_repo, make_task
from tests.verifiers.repo.wheels import wheelhouse

NO_SUCH = "tasksieve-no-such-distribution==0.0.1"


def test_fast_path_uses_the_sandbox_packages(sandbox: object, tmp_path: Path) -> None:
    site = sandbox.capabilities.site_packages  # type: ignore[attr-defined]
    if not site:
        pytest.skip("this sandbox exposes no host packages (outside a virtualenv)")
    got = resolve(RepoEnvironment(requirements=["pytest>=7"]), tmp_path, site)
    assert got.paths == tuple(site) and not got.built
    assert not (tmp_path / "envs").exists()


def test_other_python_is_not_the_fast_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    with pytest.raises(EnvironmentBuildError, match=r"wants Python 3\.2"):
        resolve(RepoEnvironment(python="3.2"), tmp_path, ("/site",))


def test_failed_build_keeps_pips_last_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    with pytest.raises(EnvironmentBuildError, match="No matching distribution") as err:
        build(RepoEnvironment(requirements=[NO_SUCH]), tmp_path)
    assert NO_SUCH in str(err.value)
    assert not [p for p in (tmp_path / "envs").iterdir() if p.is_dir()]  # nothing half-built


def test_failed_build_rejects_the_task(
    sandbox: object, repo_store: SnapshotStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    task = make_task(repo_store, build_repo(tmp_path), environment={"requirements": [NO_SUCH]})
    results, reason = run_gates(item_of(task), RepoVerifier(sandbox, repo_store), GatesConfig())  # type: ignore[arg-type]
    assert reason == "repo.environment"
    assert task.id in results[-1].detail and "No matching distribution" in results[-1].detail


def _tinydep(dest: Path) -> None:
    info = "tinydep-1.0.dist-info"
    with zipfile.ZipFile(dest / "tinydep-1.0-py3-none-any.whl", "w") as z:
        z.writestr("tinydep.py", "def double(x):\n    return 2 * x\n")
        z.writestr(f"{info}/METADATA", "Metadata-Version: 2.1\nName: tinydep\nVersion: 1.0\n")
        z.writestr(
            f"{info}/WHEEL",
            "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        )
        z.writestr(f"{info}/RECORD", "")


DEP_TESTS = """from tinydep import double

from mathlib.ops import add, mul, sub


def test_add():
    assert add(2, 3) == 5


def test_mul():
    assert mul(2, 3) == double(3)


def test_sub():
    assert sub(5, 3) == 2


def test_sub_negative():
    assert sub(3, 5) == -2
"""


@pytest.mark.slow
def test_built_environment_serves_a_verification(
    sandbox: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    house = wheelhouse(["pytest"], tmp_path / "wheels")
    _tinydep(house)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(house))
    store = SnapshotStore(tmp_path / "store")
    env = RepoEnvironment(requirements=["tinydep==1.0"])
    with ThreadPoolExecutor(2) as pool:  # two builders at once: one builds, one waits
        trees = list(pool.map(lambda _: build(env, store.root), range(2)))
    assert trees[0] == trees[1] and (trees[0] / MARKER).is_file()
    assert (trees[0] / "tinydep.py").is_file() and (trees[0] / "pytest").is_dir()
    assert not os.access(trees[0], os.W_OK) or os.geteuid() == 0
    assert not (trees[0].stat().st_mode & 0o222)  # read-only once built
    task = make_task(
        store, build_repo(tmp_path / "repo", tests=DEP_TESTS), environment=env.model_dump()
    )
    verifier = RepoVerifier(sandbox, store)  # type: ignore[arg-type]
    assert verifier.verify(task, task.reference_solution).status == "pass"
    assert verifier.verify(task, "").status == "fail"
