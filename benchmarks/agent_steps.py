"""The workload of the agent-episode benchmark: one repo task, a fixed list of agent actions,
and the two ways of running them (our live workspaces, and ``docker exec`` per step).

The actions are what a coding agent does on a repository task, minus the model: list the tree,
search it, read the file the fix touches, apply the reference patch with a Python program sent
as a heredoc, parse the patched file, count its lines. Every episode ends after the last action
(its ``max_steps`` budget), which takes the workspace's diff, as any ending does; the baseline
takes the same diff with one more ``docker exec``. A run is correct when every action exits 0 and
every episode's diff shows the patched file.
"""

from __future__ import annotations

import json
import os
import re
import resource
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from benchmarks.others_cpu import TICK, descendants, process_table
from tasksieve.schemas import TaskRecord
from tasksieve.transforms.agent import scripted
from tasksieve.transforms.agent.config import AgentConfig
from tasksieve.transforms.agent.driver import run_episodes
from tasksieve.transforms.agent.episode import Episode
from tasksieve.transforms.agent.policies import Policy
from tasksieve.transforms.agent.scripted import ScriptedPolicy
from tasksieve.transforms.agent.session import Opener, repo_spec
from tasksieve.verifiers.families.repo.snapshots import SnapshotStore
from tasksieve.verifiers.families.repo.verifier import RepoVerifier
from tasksieve.verifiers.sandbox.base import Sandbox
from tasksieve.verifiers.sandbox.process.guest.cputime import live_cpu, stat_cpu
from tasksieve.verifiers.sandbox.workspace import Workspace, WorkspaceSpec

ROOT = Path(__file__).resolve().parent.parent
TASKS = ROOT / "examples" / "tasks" / "repo.jsonl"
SNAPSHOTS = ROOT / "examples" / "snapshots"
IMAGE = "tasksieve-sandbox:latest"
BASELINE_TAG = "tasksieve-bench-episode:latest"
T = TypeVar("T")


def load_task(index: int = 0) -> TaskRecord:
    """The ``index``-th repo task of the shipped examples."""
    lines = [ln for ln in TASKS.read_text().splitlines() if ln.strip()]
    return TaskRecord.model_validate(json.loads(lines[index]))


def patched_file(task: TaskRecord) -> str:
    """The first file the task's reference patch changes."""
    found = re.search(r"^\+\+\+ b/(\S+)", task.reference_solution or "", re.M)
    if found is None:
        raise ValueError(f"task {task.id}: its reference patch names no file")
    return found.group(1)


def actions(task: TaskRecord) -> list[str]:
    """The shell commands of one episode, in order (see the module docstring)."""
    path = patched_file(task)
    return [
        "ls -la",
        "grep -rn 'def ' --include=*.py . | head -n 40",
        f"head -n 60 {path}",
        scripted.apply_command(task.reference_solution or "", "python3"),
        f"python3 -c \"import ast; ast.parse(open('{path}').read()); print('parsed')\"",
        f"wc -l {path} && echo done",
    ]


def scratch_store(task: TaskRecord, root: Path) -> SnapshotStore:
    """A snapshot store under ``root`` holding ``task``'s snapshot, copied from the shipped
    one (environments get built into a store's root; the shipped store stays untouched)."""
    store = SnapshotStore(root / "store")
    ref = store.put(SnapshotStore(SNAPSHOTS).path(repo_spec(task).snapshot))
    if ref != repo_spec(task).snapshot:
        raise ValueError(f"task {task.id}: its snapshot hashes to {ref} when stored again")
    return store


@dataclass(frozen=True)
class Run:
    """One level of one setup: episodes, steps, wall seconds, CPU-seconds, problems."""

    setup: str
    level: int
    episodes: int
    steps: int
    wall_s: float
    cpu_s: float
    problems: list[str]
    sandbox_s: float | None = None  # CPU inside the sessions (process backend only)

    @property
    def steps_per_s(self) -> float:
        return self.steps / self.wall_s

    @property
    def cpu_per_episode(self) -> float:
        return self.cpu_s / self.episodes

    @property
    def cpu_ms_per_step(self) -> float:
        return 1000 * self.cpu_s / self.steps


def episode_problems(episodes: Sequence[Episode], n_actions: int, path: str) -> list[str]:
    """What went wrong in our episodes (nothing when every action ran and the diff is right)."""
    out = []
    for e in episodes:
        codes = [s.exit_code for s in e.steps]
        if e.ending != "max_steps" or codes != [0] * n_actions or path not in e.diff:
            out.append(f"episode {e.index}: ending {e.ending}, exit codes {codes}")
    return out


class Ours:
    """Episodes through ``run_episodes`` over one backend's live workspaces."""

    def __init__(self, sandbox: Sandbox, task: TaskRecord, policy: Policy | None = None) -> None:
        self.meter = Metered(sandbox) if sandbox.name == "process" else None
        if self.meter is not None:
            sandbox = self.meter  # type: ignore[assignment]
        self.sandbox, self.task = sandbox, task
        self.steps = actions(task)
        self._tmp = tempfile.TemporaryDirectory(prefix="agent-bench-")
        store = scratch_store(task, Path(self._tmp.name))
        self.verifier = RepoVerifier(sandbox, store)
        self.cfg = AgentConfig(
            max_steps=len(self.steps), wall_s=600, command_timeout_s=60, concurrency=64
        )
        self.opener = Opener(sandbox, store, self.cfg)
        self.policy = policy or ScriptedPolicy(scripted.steps(*self.steps))
        repo_spec(task)  # fails early for a task of another family

    def run(self, episodes: int, level: int) -> list[Episode]:
        """``episodes`` episodes, ``level`` at a time (one ``run_episodes`` call per batch)."""
        done: list[Episode] = []
        cfg = AgentConfig(**{**self.cfg.__dict__, "concurrency": level})
        for start in range(0, episodes, level):
            jobs = [(self.task, i) for i in range(start, min(episodes, start + level))]
            done += run_episodes(jobs, self.policy, self.opener, self.verifier, cfg)
        return done

    def problems(self, episodes: Sequence[Episode]) -> list[str]:
        return episode_problems(episodes, len(self.steps), patched_file(self.task))


class DockerExec:
    """The baseline: ``docker run -d`` of a container holding the repository per episode, one
    ``docker exec`` per action, one more for the diff, ``docker rm -f`` at the end."""

    def __init__(self, task: TaskRecord) -> None:
        self.task, self.steps = task, actions(task)
        self.path = patched_file(task)
        tree = SnapshotStore(SNAPSHOTS).path(repo_spec(task).snapshot)
        with tempfile.TemporaryDirectory() as ctx:
            (Path(ctx) / "Dockerfile").write_text(
                f"FROM {IMAGE}\nUSER root\nCOPY repo /snapshot\nCOPY repo /workspace\n"
            )
            subprocess.run(["cp", "-a", str(tree), str(Path(ctx) / "repo")], check=True)
            subprocess.run(["docker", "build", "-q", "-t", BASELINE_TAG, ctx], check=True,
                           capture_output=True, timeout=600)  # fmt: skip

    def episode(self, _: int) -> str | None:
        """One episode; None when every action and the diff came out right, else what did not."""
        argv = ["docker", "run", "-d", "--network", "none", "-w", "/workspace", BASELINE_TAG]
        cid = subprocess.run([*argv, "sleep", "600"], capture_output=True, text=True,
                             check=True).stdout.strip()  # fmt: skip
        try:
            codes = []
            for command in self.steps:
                done = subprocess.run(["docker", "exec", "-w", "/workspace", cid, "sh", "-c",
                                       command], capture_output=True)  # fmt: skip
                codes.append(done.returncode)
            diff_argv = ["docker", "exec", cid, "diff", "-ruN", "/snapshot", "/workspace"]
            diff = subprocess.run(diff_argv, capture_output=True, text=True).stdout
        finally:
            subprocess.run(["docker", "rm", "-f", cid], capture_output=True)
        if codes != [0] * len(self.steps) or self.path not in diff:
            return f"exit codes {codes}, diff names the file: {self.path in diff}"
        return None

    def run_checked(self, episodes: int, level: int) -> list[str]:
        """``episodes`` episodes, ``level`` at a time; what went wrong in them."""
        with ThreadPoolExecutor(level) as pool:
            results = list(pool.map(self.episode, range(episodes)))
        return [f"episode {i}: {r}" for i, r in enumerate(results) if r is not None]

    def close(self) -> None:
        subprocess.run(["docker", "image", "rm", "-f", BASELINE_TAG], capture_output=True)


DAEMONS = (b"dockerd", b"containerd")


def run_cpu_seconds() -> float:
    """CPU seconds of this run's own processes and of the Docker daemons, so far.

    This process and every descendant it has reaped (``RUSAGE_CHILDREN``: a session's
    bubblewrap, agent and commands once closed; ``docker`` CLI calls), plus ``dockerd`` and
    ``containerd`` with the children they reaped. NOT counted: the other work on the machine,
    and processes inside containers and their shims (so the docker setups' figures are
    lower bounds)."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        use = resource.getrusage(who)
        total += use.ru_utime + use.ru_stime
    tick = os.sysconf("SC_CLK_TCK")
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            if (p / "comm").read_bytes().strip() not in DAEMONS:
                continue
            fields = (p / "stat").read_bytes().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(x) for x in fields[11:15]) / tick  # utime stime cutime cstime
    return total


def timed_level(go: Callable[[int, int], T], episodes: int, level: int) -> tuple[float, float, T]:
    """(wall s, CPU s of the run (``run_cpu_seconds``), result) of ``go(episodes, level)``."""
    cpu0, t0 = run_cpu_seconds(), time.perf_counter()
    result = go(episodes, level)
    return time.perf_counter() - t0, run_cpu_seconds() - cpu0, result


def session_cpu_s(host_pid: int | None) -> float:
    """CPU seconds of a live process-backend session: every process under its bubblewrap (or
    its pid 1 forked by the zygote), each with the CPU of the children it reaped (the shell's
    includes every command run).

    Walks the session's own tree (``/proc/PID/task/TID/children``: the fork server's
    ``live_cpu``); only where that walk gives up (a tree too big or too busy to read in
    20 ms) does it scan every process of the machine, whose cost grows with the sessions
    alive and took CPU from the sessions themselves at 64 at once."""
    if host_pid is None:
        return 0.0
    own, tree = stat_cpu(host_pid), live_cpu(host_pid)
    if own is not None and tree is not None:
        return own + tree
    return _scanned_cpu_s(host_pid)


def _scanned_cpu_s(host_pid: int) -> float:
    """``session_cpu_s`` by a scan of every process (ticks only)."""
    table = process_table()
    return sum(table[pid][2] for pid in descendants(table, [host_pid])) / TICK


def thread_cpu_s() -> float:
    """CPU seconds of the calling thread so far."""
    use = resource.getrusage(resource.RUSAGE_THREAD)
    return use.ru_utime + use.ru_stime


class Metered:
    """A sandbox whose process-backend sessions add their CPU to ``sandbox_s`` when closed.

    Reading a session's CPU walks its process tree (``session_cpu_s``); what the readings
    cost this process is kept apart in ``meter_s`` (the benchmark takes it off this run's CPU:
    it is the measurement's, not the sandbox's)."""

    def __init__(self, inner: Sandbox) -> None:
        self.inner, self.sandbox_s, self.meter_s = inner, 0.0, 0.0
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def open_workspace(self, spec: WorkspaceSpec) -> Workspace:
        ws = self.inner.open_workspace(spec)
        close, meter = ws.close, self

        def metered_close(*args: Any, **kwargs: Any) -> None:
            if getattr(ws, "_closed", False):
                return
            t0 = thread_cpu_s()
            used = session_cpu_s(getattr(ws, "host_pid", None))
            scan = thread_cpu_s() - t0
            with meter._lock:
                meter.sandbox_s += used
                meter.meter_s += scan
            close(*args, **kwargs)

        ws.close = metered_close  # type: ignore[method-assign]
        return ws
