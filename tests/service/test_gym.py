"""The Gym endpoints (``/v1/envs``) on a real ``tasksieve serve``, from friendly and hostile
clients: a scripted solver passes and an idler fails through ``RemoteAgentEnv``; malformed
tasks, unknown ids, other tokens, huge actions, concurrent steps, the per-client cap and a
client that hangs up mid-step are each answered clearly; no process or mount is left after an
env is deleted or expires (counted in this host's /proc)."""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tasksieve.schemas import TaskRecord
from tasksieve.transforms.agent import scripted
from tasksieve.transforms.agent.env import EpisodeOver
from tasksieve.transforms.agent.remote_env import RemoteAgentEnv, RemoteEnvError
from tasksieve.verifiers.families.repo.snapshots import SnapshotStore
from tests.service.servers import TOKEN, Server, start_server
from tests.service.test_sessions import mounts, wait_gone, wait_seen
from tests.verifiers.repo.repo_fixture import REFERENCE, build_repo, make_task

TTL_S = 4


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> SnapshotStore:
    return SnapshotStore(tmp_path_factory.mktemp("gym-store"))


@pytest.fixture(scope="module")
def task(tmp_path_factory: pytest.TempPathFactory, store: SnapshotStore) -> TaskRecord:
    return make_task(store, build_repo(Path(tmp_path_factory.mktemp("gym-repo"))), "repo/gym")


@pytest.fixture(scope="module")
def gym(tmp_path_factory: pytest.TempPathFactory, store: SnapshotStore) -> Iterator[Server]:
    flags = ["--snapshot-store", str(store.root), "--max-envs-per-client", "2"]
    flags += ["--session-ttl", str(TTL_S), "--max-body", "env_step=100000"]
    srv = start_server(tmp_path_factory.mktemp("gym"), *flags)
    yield srv
    srv.stop()


def open_env(gym: Server, task: TaskRecord, client: str) -> str:
    body = {"task": task.model_dump(mode="json")}
    resp = gym.post("/v1/envs", body, **{"X-Client-Id": client})
    assert resp.status_code == 201, resp.text
    return str(resp.json()["env_id"])


def step(gym: Server, env_id: str, action: Any, timeout: float = 60) -> httpx.Response:
    return gym.post(f"/v1/envs/{env_id}/step", {"action": action}, timeout=timeout)


def delete(gym: Server, env_id: str) -> int:
    url = f"{gym.url}/v1/envs/{env_id}"
    return httpx.delete(url, headers=gym.headers(), timeout=30).status_code


def test_a_solver_passes_and_an_idler_fails_through_the_remote_env(
    gym: Server, task: TaskRecord
) -> None:
    with RemoteAgentEnv(gym.url, TOKEN, client_id="solver") as env:
        first = env.reset(task)
        assert task.prompt in first and env.messages
        obs, reward, done, info = env.step(scripted.fenced(scripted.apply_command(REFERENCE)))
        assert (reward, done, info["exit_code"]) == (0.0, False, 0), obs
        assert info["cpu_s"] is not None and info["cpu_s"] >= 0, info  # the patch's commands
        _, reward, done, info = env.step(scripted.SUBMIT)
        assert done and reward == 1.0 and info["verdict"].status == "pass"
        with pytest.raises(EpisodeOver):
            env.step(scripted.SUBMIT)
        env.reset(task)  # a fresh workspace: the fix above is not in it
        _, reward, done, info = env.step(scripted.SUBMIT)
        assert done and reward == 0.0 and info["verdict"].status == "fail"


def test_a_step_after_done_is_409_on_the_wire(gym: Server, task: TaskRecord) -> None:
    env_id = open_env(gym, task, "after-done")
    assert step(gym, env_id, scripted.SUBMIT).json()["done"] is True
    again = step(gym, env_id, scripted.SUBMIT)
    assert again.status_code == 409 and "over" in again.json()["detail"]
    assert delete(gym, env_id) == 200


@pytest.mark.parametrize(
    ("mutate", "status", "says"),
    [
        (lambda t: t["verifier"].pop("snapshot"), 422, "task.verifier"),
        (lambda t: t.pop("id"), 422, "task.id"),
        (lambda t: t["verifier"].update(snapshot="sha256:" + "0" * 64), 400, "snapshot"),
        (lambda t: t["verifier"].update(fail_to_pass="not a list"), 422, "fail_to_pass"),
    ],
    ids=["no-snapshot", "no-id", "unknown-snapshot", "wrong-type"],
)
def test_a_malformed_task_is_4xx_naming_the_field(
    gym: Server, task: TaskRecord, mutate: Any, status: int, says: str
) -> None:
    raw = task.model_dump(mode="json")
    mutate(raw)
    resp = gym.post("/v1/envs", {"task": raw})
    assert resp.status_code == status and says in resp.json()["detail"], resp.text


def test_bodies_that_are_not_a_create_request_are_422(gym: Server) -> None:
    assert gym.post("/v1/envs", {"task": "x"}).status_code == 422
    assert gym.post("/v1/envs", {"tasks": {}}).status_code == 422
    other = {"id": "py/1", "family": "python", "prompt": "p", "reference_solution": "x"}
    other["verifier"] = {"family": "python", "entry_point": "f", "tests": "assert True"}
    resp = gym.post("/v1/envs", {"task": other})
    assert resp.status_code in (400, 422) and "repo" in resp.text, resp.text


def test_unknown_ids_other_tokens_and_huge_actions(gym: Server, task: TaskRecord) -> None:
    assert step(gym, "no-such-env", "x").status_code == 404
    assert delete(gym, "no-such-env") == 404
    env_id = open_env(gym, task, "hostile")
    url = f"{gym.url}/v1/envs/{env_id}/step"
    wrong = httpx.post(url, json={"action": "x"}, headers={"Authorization": "Bearer other"})
    assert wrong.status_code == 401
    huge = step(gym, env_id, "x" * 200_000)
    assert huge.status_code == 413
    ok = step(gym, env_id, scripted.fenced("echo still-here"))
    assert ok.status_code == 200 and "still-here" in ok.json()["observation"]
    assert delete(gym, env_id) == 200
    assert step(gym, env_id, "x").status_code == 404


def test_concurrent_steps_on_one_env_run_one_at_a_time(gym: Server, task: TaskRecord) -> None:
    env_id = open_env(gym, task, "racer")
    statuses: list[int] = []

    def go() -> None:
        statuses.append(step(gym, env_id, scripted.fenced("sleep 3; echo slept")).status_code)

    threads = [threading.Thread(target=go) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(statuses) == [200, 409, 409], statuses
    assert delete(gym, env_id) == 200


def test_the_per_client_cap_is_429_and_a_delete_frees_a_slot(gym: Server, task: TaskRecord) -> None:
    held = [open_env(gym, task, "greedy") for _ in range(2)]
    body = {"task": task.model_dump(mode="json")}
    refused = gym.post("/v1/envs", body, **{"X-Client-Id": "greedy"})
    assert refused.status_code == 429 and "greedy" in refused.json()["detail"]
    other = open_env(gym, task, "modest")
    assert delete(gym, held.pop()) == 200
    held.append(open_env(gym, task, "greedy"))
    for env_id in [*held, other]:
        assert delete(gym, env_id) == 200


def test_a_client_that_hangs_up_mid_step_leaves_a_consistent_env(
    gym: Server, task: TaskRecord
) -> None:
    env_id = open_env(gym, task, "quitter")
    with pytest.raises(httpx.ReadTimeout):
        step(gym, env_id, scripted.fenced("sleep 2; echo finished > done.txt"), timeout=0.5)
    assert step(gym, env_id, scripted.fenced("true")).status_code == 409  # still running
    deadline = time.monotonic() + 30
    while (got := step(gym, env_id, scripted.fenced("cat done.txt"))).status_code == 409:
        assert time.monotonic() < deadline, "the abandoned step never finished"
        time.sleep(0.5)
    assert got.status_code == 200 and "finished" in got.json()["observation"], got.text
    assert delete(gym, env_id) == 200


def test_no_process_or_mount_outlives_a_deleted_or_expired_env(
    gym: Server, task: TaskRecord
) -> None:
    before = mounts(gym)
    markers = [f"{85000 + secrets.randbelow(999)}.{secrets.randbelow(10**6)}" for _ in range(2)]
    envs = [open_env(gym, task, "leaky") for _ in markers]
    for env_id, marker in zip(envs, markers, strict=True):
        got = step(gym, env_id, scripted.fenced(f"sleep {marker} &"))
        assert got.status_code == 200 and wait_seen(marker, 1) == 1, got.text
    assert delete(gym, envs[0]) == 200
    assert wait_gone(markers[0], 5) == []
    assert wait_gone(markers[1], TTL_S + 4) == []  # idle past the TTL: reaped
    assert step(gym, envs[1], "x").status_code == 404
    assert mounts(gym) == before


def test_the_remote_env_reports_the_servers_reason(gym: Server, task: TaskRecord) -> None:
    raw = task.model_dump(mode="json")
    raw["verifier"].pop("snapshot")
    with RemoteAgentEnv(gym.url, TOKEN) as env, pytest.raises(RemoteEnvError) as err:
        env.reset(raw)
    assert err.value.status == 422 and "snapshot" in err.value.detail
    with RemoteAgentEnv(gym.url, "wrong-token") as env, pytest.raises(RemoteEnvError) as err:
        env.reset(task)
    assert err.value.status == 401
