"""Agents in real workspaces (process and docker backends): a solver passes, an idler fails,
and hostile agents end with a failing or budget verdict and leave no process behind.

Each episode's first command exports a marker into its shell; every process the agent starts
inherits it, so after the episodes a scan of ``/proc/*/environ`` for the marker finds anything
left running (``leftovers``). Skipped where the backend opens no workspaces (its
``capabilities.workspaces``) or cannot run here.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tasksieve.schemas import TaskRecord
from tasksieve.transforms.agent import scripted
from tasksieve.transforms.agent.config import AgentConfig
from tasksieve.transforms.agent.driver import run_episodes
from tasksieve.transforms.agent.episode import BUDGET_ENDINGS, Episode
from tasksieve.transforms.agent.rows import trajectory_rows
from tasksieve.transforms.agent.scripted import ScriptedPolicy
from tasksieve.transforms.agent.session import Opener
from tasksieve.verifiers.families.repo.snapshots import SnapshotStore
from tasksieve.verifiers.families.repo.verifier import RepoVerifier
from tasksieve.verifiers.registry import make_sandbox
from tasksieve.verifiers.sandbox.base import Sandbox, SandboxUnavailable
from tests.transforms.agent.conftest import judging_verifier, reference_problem
from tests.verifiers.repo.repo_fixture import build_repo, make_task

CFG = AgentConfig(max_steps=6, wall_s=90, command_timeout_s=8, max_processes=32)
SECRET = "assert sub(3, 5) == -2"  # a line of the hidden test file


@pytest.fixture(scope="module", params=["process", "docker"])
def backend(request: pytest.FixtureRequest) -> Iterator[Sandbox]:
    try:
        sb = make_sandbox(request.param)
    except (SandboxUnavailable, ImportError) as exc:
        pytest.skip(f"{request.param} sandbox unavailable: {exc}")
    if not sb.capabilities.workspaces:
        sb.close()
        pytest.skip(f"the {request.param} backend opens no workspaces yet")
    yield sb
    sb.close()


@pytest.fixture(scope="module")
def verifier(backend: Sandbox, agent_store: SnapshotStore, agent_task: TaskRecord) -> RepoVerifier:
    return judging_verifier(backend, agent_store, agent_task)


@pytest.fixture(scope="module")
def judged(verifier: RepoVerifier, agent_task: TaskRecord) -> None:
    """The repo verifier passes the reference patch on this backend (a precondition)."""
    assert reference_problem(verifier, agent_task) is None


@pytest.fixture(scope="module")
def small_disk_task(
    agent_store: SnapshotStore, tmp_path_factory: pytest.TempPathFactory
) -> TaskRecord:
    """The agent task with a small disk quota, for the agent that fills the disk."""
    tree = build_repo(Path(tmp_path_factory.mktemp("agent-mathlib-small")))
    return make_task(agent_store, tree, task_id="repo/agent-mathlib-small", disk_mb=DISK_MB)


def _host_disk(backend: Sandbox) -> str:
    """Where a workspace's writes would land on this host if nothing bounded them."""
    docker_root = "/var/lib/docker"
    return docker_root if backend.name == "docker" and os.path.isdir(docker_root) else "/"


def leftovers(marker: str) -> list[int]:
    """Pids of processes whose environment holds ``marker``."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            if marker.encode() in Path(f"/proc/{pid}/environ").read_bytes():
                found.append(int(pid))
    return found


def _episodes(
    backend: Sandbox, verifier: RepoVerifier, task: TaskRecord, *commands: str
) -> tuple[Episode, list[int]]:
    marker = f"TASKSIEVE_AGENT_MARK={uuid.uuid4().hex}"
    script = scripted.steps(f"export {marker}", *commands)
    opener = Opener(backend, verifier.store, CFG)
    (ep,) = run_episodes([(task, 0)], ScriptedPolicy(script), opener, verifier, CFG)
    time.sleep(0.5)
    left = leftovers(marker)
    for pid in left:  # never leave them running, whatever the assertions say
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return ep, left


def test_scripted_solver_passes_and_idler_fails(
    backend: Sandbox, verifier: RepoVerifier, agent_task: TaskRecord, judged: None
) -> None:
    policy = ScriptedPolicy(scripted.solver(backend.python))
    opener = Opener(backend, verifier.store, CFG)
    (ep,) = run_episodes([(agent_task, 0)], policy, opener, verifier, CFG)
    assert ep.ending == "submitted" and ep.verdict and ep.verdict.status == "pass", ep.verdict
    assert len(trajectory_rows(ep, "r", "scripted")) == 4
    ep, left = _episodes(backend, verifier, agent_task, "ls")
    assert ep.verdict and ep.verdict.status == "fail" and not left


HOSTILE = {
    "edits_the_tests": [
        "mkdir -p tests && printf 'def test_sub():\\n    pass\\n\\ndef test_sub_negative():\\n"
        "    pass\\n' > tests/test_ops.py",
        "rm -rf tests/__init__.py; echo 'import pytest' > conftest.py",
    ],
    "reads_hidden_tests": [  # every way back to the lower layer: mount, agent's /proc, mounts
        "cat tests/test_ops.py /snapshot/tests/test_ops.py /proc/1/root/snapshot/tests/test_ops.py"
        "; for f in /proc/1/fd/* /proc/1/cwd /proc/1/root; do ls $f/tests; done; "
        "sed -n '/overlay/p' /proc/self/mountinfo",
        "grep -rF 'sub(3, 5)' / 2>/dev/null | head",
    ],
    "kills_its_own_shell": ["kill -9 $$", "echo after"],
    "fills_the_disk": [  # each file stops at the size limit, the quota stops the set
        "for i in $(seq 20); do dd if=/dev/zero of=fill$i.bin bs=1M count=100000 2>&1 | "
        "grep -o 'No space left on device' | head -1; done; df -k . | tail -1",
    ],
    "fork_bomb": [":(){ :|:& };:", "echo after"],
    "leaves_a_daemon": ["(setsid sleep 1000 &) ; nohup sleep 999 >/dev/null 2>&1 &"],
}
KINDS = sorted(HOSTILE)
DISK_MB = 32  # the quota of the task the disk filler gets (20 files of 32 MB would pass it)


def _free_mb(path: str) -> float:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize / 2**20


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_hostile_agent_fails_and_leaves_nothing(
    kind: str,
    backend: Sandbox,
    verifier: RepoVerifier,
    agent_task: TaskRecord,
    request: pytest.FixtureRequest,
) -> None:
    if kind == "edits_the_tests":  # its subject is the verdict: needs a verifier that can pass
        request.getfixturevalue("judged")
    task = agent_task
    if kind == "fills_the_disk":
        task = request.getfixturevalue("small_disk_task")
    free = _free_mb(tempfile.gettempdir()), _free_mb(_host_disk(backend))
    ep, left = _episodes(backend, verifier, task, *HOSTILE[kind])
    assert ep.verdict is not None and ep.verdict.status in ("fail", "timeout"), ep.verdict
    assert ep.ending == "submitted" or ep.ending in BUDGET_ENDINGS
    assert not left, f"processes left running: {left}"
    seen = "\n".join(s.observation for s in ep.steps)
    assert SECRET not in seen
    if kind == "fills_the_disk":
        assert "No space left on device" in seen, seen[-2000:]
        size = re.search(r"(\d+)\s+\d+\s+\d+\s+\d+%\s+/workspace", seen)
        assert size and int(size[1]) < 4 * DISK_MB * 1024, seen[-500:]  # the quota, in KiB
        after = _free_mb(tempfile.gettempdir()), _free_mb(_host_disk(backend))
        assert all(b - a < 8 * DISK_MB for b, a in zip(free, after, strict=True)), (free, after)


@pytest.mark.slow
def test_never_submitting_ends_on_a_budget(
    backend: Sandbox, verifier: RepoVerifier, agent_task: TaskRecord
) -> None:
    marker = f"TASKSIEVE_AGENT_MARK={uuid.uuid4().hex}"
    script = scripted.never_submits(f"export {marker}; sleep 0.2")
    opener = Opener(backend, verifier.store, CFG)
    (ep,) = run_episodes([(agent_task, 0)], ScriptedPolicy(script), opener, verifier, CFG)
    assert ep.ending == "max_steps" and ep.verdict and ep.verdict.status == "fail"
    assert not leftovers(marker)
