"""Memory a run holds outside its address space is bounded, and gone before the next sample.

``RLIMIT_AS`` counts mappings, not memory: a SysV segment attached, filled and detached, a
semaphore set, a ``memfd`` written and never mapped all hold memory the limit never sees, and
SysV objects outlive the process. Each hostile run below tries one of these ways; the run
must stay within its budget (or be killed), the sandbox must keep working, and in a
multi-sample entry the next sample must find nothing of it.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tasksieve.verifiers.families.python.verifier import PythonVerifier
from tasksieve.verifiers.sandbox.base import Limits
from tasksieve.verifiers.sandbox.process import cgroups, servercg
from tasksieve.verifiers.sandbox.process.guest import ipclimits
from tasksieve.verifiers.sandbox.process.sandbox import ProcessSandbox
from tests.verifiers.test_multi_samples import GOOD, HOSTILE, PROBE, TASK

LIBC = """
import ctypes, json, os
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
libc.shmget.argtypes = [ctypes.c_int, ctypes.c_size_t, ctypes.c_int]
libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
libc.shmdt.argtypes = [ctypes.c_void_p]
"""
# Attach, fill and detach SysV segments of 16 MB until the kernel refuses one.
SHM_HOARD = (
    LIBC
    + """
held, err = 0, None
for _ in range(64):
    sid = libc.shmget(0, 16 << 20, 0o1600)
    if sid < 0:
        err = ctypes.get_errno()
        break
    addr = libc.shmat(sid, None, 0)
    ctypes.memset(addr, 1, 16 << 20)
    libc.shmdt(ctypes.c_void_p(addr))
    held += 16
print(json.dumps({"held_mb": held, "errno": err}))
"""
)
SEM_HOARD = (
    LIBC
    + """
big = libc.semget(0, 32000, 0o1600)
big_errno = ctypes.get_errno()
sets = 0
while sets < 100000 and libc.semget(0, 250, 0o1600) >= 0:
    sets += 1
mq = libc.mq_open(b"/ts-probe", os.O_CREAT | os.O_RDWR, 0o600, None)
print(json.dumps({"big": big, "big_errno": big_errno, "sets": sets, "mq": mq}))
"""
)
MEMFD_HOG = """
import os
chunk = b"x" * (1 << 20)
fds = []
for _ in range(200):
    fd = os.memfd_create("hog")
    for _ in range(15):
        os.write(fd, chunk)
    fds.append(fd)
print("held", len(fds) * 15, "MB")
"""
FAST = Limits(wall_s=20, cpu_s=10, memory_mb=64)


def _py(sb: ProcessSandbox, code: str) -> list[str]:
    return [sb.python, "-I", "-S", "-c", code]


@pytest.fixture(
    scope="module",
    params=[
        pytest.param({}, id="default"),
        pytest.param({"warm": False}, id="per-run"),
        pytest.param({"warm": False, "isolation": "unshare"}, id="process-unshare"),
    ],
)
def box(request: pytest.FixtureRequest, sandbox: ProcessSandbox) -> Iterator[ProcessSandbox]:
    """The fork server (the session's sandbox), a per-run bubblewrap sandbox (its SysV calls
    refused by seccomp) and the ``unshare`` fallback (its guest bounds the namespace)."""
    if not request.param:
        yield sandbox
        return
    made = ProcessSandbox(**request.param)
    yield made
    made.close()


def test_sysv_shared_memory_is_bounded_by_the_run_memory_limit(box: ProcessSandbox) -> None:
    ex = box.run({}, _py(box, SHM_HOARD), FAST)
    assert ex.exit_code == 0, ex.stderr[-500:]
    got = json.loads(ex.stdout)
    assert got["held_mb"] <= FAST.memory_mb and got["errno"] is not None, got


def test_semaphores_and_message_queues_are_bounded(box: ProcessSandbox) -> None:
    ex = box.run({}, _py(box, SEM_HOARD), FAST)
    assert ex.exit_code == 0, ex.stderr[-500:]
    got = json.loads(ex.stdout)
    assert got["big"] == -1 and got["sets"] <= 64 and got["mq"] == -1, got


@pytest.fixture(scope="module")
def small_server() -> Iterator[ProcessSandbox]:
    box = ProcessSandbox(server_memory_mb=512)
    if not box.describe()["server_cgroup"].startswith("memory limit"):
        box.close()
        pytest.skip(f"no server cgroup here: {box.describe()['server_cgroup']}")
    yield box
    box.close()


def test_a_memfd_hog_is_killed_inside_the_server_cgroup(small_server: ProcessSandbox) -> None:
    """3 GB of memfd pages under a 64 MB address-space limit: the server's cgroup kills the run
    at 512 MB, and the server (and the machine) are unharmed."""
    ex = small_server.run({}, _py(small_server, MEMFD_HOG), FAST)
    assert ex.exit_code != 0 and b"held" not in ex.stdout, (ex.exit_code, ex.stdout)
    assert ex.limit_hit == "memory", ex
    after = small_server.run({}, _py(small_server, "print(6 * 7)"), FAST)
    assert (after.exit_code, after.stdout) == (0, b"42\n")


def test_a_memfd_hog_sample_fails_alone_in_a_multi_sample_entry(
    small_server: ProcessSandbox,
) -> None:
    """The out-of-memory killer takes the hoarding candidate, not the tests process: the
    samples after it in the same entry are judged as usual."""
    hog = MEMFD_HOG.replace('print("held", len(fds) * 15, "MB")', "") + GOOD
    verdicts = PythonVerifier(small_server).verify_many(TASK, [GOOD, hog, GOOD, GOOD])
    assert [v.status for v in verdicts] == ["pass", "error", "pass", "pass"], verdicts


def test_a_samples_sysv_objects_are_gone_before_the_next_sample(sandbox: ProcessSandbox) -> None:
    if not sandbox.capabilities.paired_runs:
        pytest.skip("needs the fork server (bubblewrap; root or subordinate uids)")
    sysv = HOSTILE["sysv"][0]
    verdicts = PythonVerifier(sandbox).verify_many(TASK, [sysv, PROBE, sysv, PROBE])
    assert [v.status for v in verdicts] == ["pass"] * 4, verdicts


def test_runs_are_the_first_the_kernel_kills_when_memory_runs_out(sandbox: ProcessSandbox) -> None:
    if sandbox.describe()["executor"] != "forkserver":
        pytest.skip("the fork server's runs set it; per-run paths keep the caller's")
    ex = sandbox.run({}, _py(sandbox, "print(open('/proc/self/oom_score_adj').read())"), FAST)
    assert (ex.exit_code, ex.stdout.strip()) == (0, b"1000"), ex


def test_ipc_limits_the_kernel_refuses_are_reported_and_missing_ones_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before Linux 5.19 only the initial namespace's root may set them: ``limit_ipc`` then
    says so (the caller refuses SysV IPC instead) rather than failing every run."""
    (tmp_path / "sys" / "kernel").mkdir(parents=True)
    for name in ("shmmax", "shmall", "shmmni", "sem", "msgmni", "msgmnb"):
        (tmp_path / "sys" / "kernel" / name).write_text("")
    assert ipclimits.limit_ipc(64 << 20, str(tmp_path)) is True  # no fs/mqueue: skipped
    assert (tmp_path / "sys" / "kernel" / "shmmax").read_text() == str(64 << 20)

    def refused(path: str, value: str) -> None:
        raise PermissionError(13, "Permission denied", path)

    monkeypatch.setattr(ipclimits, "_put", refused)
    assert ipclimits.limit_ipc(64 << 20, str(tmp_path)) is False


def test_where_ipc_limits_are_refused_the_runs_cannot_create_sysv_objects() -> None:
    """The fork server's fallback, forced: every entry as if the kernel refused its limits."""
    box = ProcessSandbox()
    server = getattr(box, "_server", None)
    if server is None:
        box.close()
        pytest.skip("needs the fork server")
    try:
        marker = "_NOIPC: list[bool] = []"
        assert server.source.count(marker) == 1
        server.source = server.source.replace(marker, "_NOIPC: list[bool] = [True]")
        server.close()  # the next run starts it with the changed guest
        shm = json.loads(box.run({}, _py(box, SHM_HOARD), FAST).stdout)
        sem = json.loads(box.run({}, _py(box, SEM_HOARD), FAST).stdout)
        assert shm == {"held_mb": 0, "errno": 1}, shm
        assert (sem["big"], sem["big_errno"], sem["sets"], sem["mq"]) == (-1, 1, 0, -1), sem
    finally:
        box.close()


def test_a_run_cannot_lower_its_oom_score_again(sandbox: ProcessSandbox) -> None:
    """Where the server holds CAP_SYS_RESOURCE, a job's own write set the lowest score it may
    return to: made dumpable again, it still cannot go below 1000."""
    if sandbox.describe()["executor"] != "forkserver":
        pytest.skip("the fork server's runs set it")
    if "CAP_SYS_RESOURCE" not in servercg.server_caps(()):
        pytest.skip("this host's root lacks CAP_SYS_RESOURCE: runs may return to 0 (documented)")
    code = (
        "import ctypes, os\nctypes.CDLL(None).prctl(4, 1, 0, 0, 0)\n"
        "try:\n    open('/proc/self/oom_score_adj', 'w').write('0')\n    print('lowered')\n"
        "except OSError as e:\n    print('refused', e.errno)\n"
    )
    ex = sandbox.run({}, _py(sandbox, code), FAST)
    assert ex.stdout.startswith(b"refused"), ex


def test_cgroups_left_by_sandboxes_never_closed_are_swept() -> None:
    """Empty ones older than a minute go; a fresh one and an old one with a process stay."""
    _, bases = cgroups.probe()
    if not bases:
        pytest.skip("no writable cgroup hierarchy here")
    tag = uuid.uuid4().hex[:8]
    made = {k: {c: os.path.join(b, f"tasksieve-fs-{k}-{tag}") for c, b in bases.items()}
            for k in ("stale", "fresh", "busy")}  # fmt: skip
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        for k, dirs in made.items():
            for d in dirs.values():
                os.mkdir(d)
                if k != "fresh":
                    os.utime(d, (time.time() - 3600, time.time() - 3600))
                if k == "busy":
                    with open(os.path.join(d, "cgroup.procs"), "w") as fh:
                        fh.write(str(sleeper.pid))
        cgroups.sweep(bases)
        left = {k: [os.path.isdir(d) for d in dirs.values()] for k, dirs in made.items()}
        n = len(bases)
        assert left == {"stale": [False] * n, "fresh": [True] * n, "busy": [True] * n}, left
    finally:
        sleeper.kill()
        sleeper.wait()
        for dirs in made.values():
            for d in dirs.values():
                with contextlib.suppress(OSError):
                    os.rmdir(d)
