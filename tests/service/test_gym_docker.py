"""The Gym endpoints (``/v1/envs``) on a real ``tasksieve serve --sandbox docker``: a scripted
solver passes and an idler fails through ``RemoteAgentEnv``, a step's shell state persists,
and a deleted env leaves no process behind (counted in this host's /proc, where a container's
processes show too). Skipped, with the reason, where no Docker engine or image is usable."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tasksieve.schemas import TaskRecord
from tasksieve.transforms.agent import scripted
from tasksieve.transforms.agent.remote_env import RemoteAgentEnv
from tasksieve.verifiers.families.repo.snapshots import SnapshotStore
from tasksieve.verifiers.registry import make_sandbox
from tasksieve.verifiers.sandbox.base import SandboxUnavailable
from tests.service.servers import TOKEN, Server, start_server
from tests.service.test_gym import delete, open_env, step
from tests.service.test_sessions import wait_gone, wait_seen
from tests.verifiers.repo.repo_fixture import REFERENCE, build_repo, make_task

pytestmark = pytest.mark.slow  # a container per env


@pytest.fixture(scope="module")
def docker_ready() -> None:
    try:
        sb = make_sandbox("docker")
    except (SandboxUnavailable, ImportError) as exc:
        pytest.skip(f"docker sandbox unavailable: {exc}")
    try:
        if not sb.capabilities.workspaces:
            pytest.skip("the docker backend opens no workspaces here")
    finally:
        sb.close()


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> SnapshotStore:
    return SnapshotStore(tmp_path_factory.mktemp("gym-docker-store"))


@pytest.fixture(scope="module")
def task(tmp_path_factory: pytest.TempPathFactory, store: SnapshotStore) -> TaskRecord:
    tree = build_repo(Path(tmp_path_factory.mktemp("gym-docker-repo")))
    return make_task(store, tree, "repo/gym-docker")


@pytest.fixture(scope="module")
def gym(
    docker_ready: None, tmp_path_factory: pytest.TempPathFactory, store: SnapshotStore
) -> Iterator[Server]:
    flags = ["--sandbox", "docker", "--snapshot-store", str(store.root)]
    srv = start_server(tmp_path_factory.mktemp("gym-docker"), *flags, "--session-ttl", "60")
    yield srv
    srv.stop()


def test_a_solver_passes_and_an_idler_fails_on_docker(gym: Server, task: TaskRecord) -> None:
    health = httpx.get(f"{gym.url}/healthz", timeout=10).json()
    assert (health["backend"], health["session_mode"]) == ("docker", "live"), health
    with RemoteAgentEnv(gym.url, TOKEN, client_id="docker-solver") as env:
        env.reset(task)
        obs, reward, done, info = env.step(scripted.fenced("cd /workspace && export MARK=kept"))
        assert (reward, done, info["exit_code"]) == (0.0, False, 0), obs
        obs, _, _, info = env.step(scripted.fenced('echo "$PWD $MARK"'))
        assert "/workspace kept" in obs and info["exit_code"] == 0, obs
        obs, reward, done, info = env.step(scripted.fenced(scripted.apply_command(REFERENCE)))
        assert (reward, done, info["exit_code"]) == (0.0, False, 0), obs
        _, reward, done, info = env.step(scripted.SUBMIT)
        assert done and reward == 1.0 and info["verdict"].status == "pass", info
        env.reset(task)  # a fresh container: the fix above is not in it
        _, reward, done, info = env.step(scripted.SUBMIT)
        assert done and reward == 0.0 and info["verdict"].status == "fail"


def test_a_deleted_docker_env_leaves_no_process(gym: Server, task: TaskRecord) -> None:
    marker = f"{86000 + secrets.randbelow(999)}.{secrets.randbelow(10**6)}"
    env_id = open_env(gym, task, "docker-leaky")
    got = step(gym, env_id, scripted.fenced(f"sleep {marker} &"))
    assert got.status_code == 200 and wait_seen(marker, 1) == 1, got.text
    assert delete(gym, env_id) == 200
    assert wait_gone(marker, 15) == []
    assert step(gym, env_id, "x").status_code == 404
