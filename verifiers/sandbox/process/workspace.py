"""Workspaces of the ``process`` sandbox: one namespaced guest agent per session.

``open_process_workspace`` starts ``guest/wsinit.py`` as pid 1 of fresh mount, pid, network
(loopback only), ipc and uts namespaces, with bubblewrap (``--as-pid-1``; bubblewrap builds
the read-only root, the guest mounts the layer, since bubblewrap before 0.9 has no overlay
options and none of its versions bounds an overlay's size) or with ``unshare`` (the guest
builds the root too). The guest mounts the copy-on-write layer (see ``wsinit``) and serves the
session over its stdin/stdout (``verifiers.sandbox.wsclient``). Processes are started from a
long-lived keeper thread, since parent-death signals fire when the forking thread exits.

As root, given the sandbox's zygote (``wszygote``; ``make_zygote`` decides from the sandbox's
``workspace_open``), a session is instead forked from that pre-imported guest into fresh
namespaces where it runs the ``unshare`` path's set-up (``wsinit.run_session``): no
bubblewrap, no interpreter start; the same root, layer, limits, cgroup and frames. Where the
zygote cannot start or fork, the open falls back to the cold start above.

The snapshot is bound at /snapshot only long enough to mount the overlay; then the guest
detaches it, so nothing in the session (the agent included) reaches the lower layer, and a
file deleted from the view (an agent's hidden tests) cannot be read back. ``diff`` is computed
on the host (``verifiers.sandbox.wshostdiff``) from the upper layer's report and the snapshot
in the store.

As root the session runs as a per-session uid (``uids.UIDS``), so RLIMIT_NPROC bounds the
session's processes together; unprivileged, in a nested user namespace as the caller's uid.
Every process of the session gets the rlimits of ``SessionLimits`` (address space =
``memory_mb``, CPU seconds, processes, file size = ``disk_mb``, no core dumps), no_new_privs
and the sandbox's seccomp filter; the disk quota is the layer's tmpfs size. ``close`` kills
the namespace's init, so the kernel kills every process in it and drops its mounts.

As root, where a cgroup hierarchy is writable (``cgroups``), the session's init is moved into
a cgroup of its own before it starts anything: memory (swap included) summed over the
session's processes, their number and one CPU's worth of time are bounded there too; the
agent itself is kept out of the OOM killer's reach (its children are not).

It does NOT bound memory or CPU summed over a session's processes where no cgroup is
writable (unprivileged, say), and unprivileged, snapshot files owned by another uid than the
caller's stay read-only in the workspace.
"""

from __future__ import annotations

import contextlib
import functools
import json
import marshal
import os
import subprocess
import sys
import threading
import time
from typing import Any

from tasksieve.verifiers.sandbox.process.binds import base_site_dirs
from tasksieve.verifiers.sandbox.process.cgroups import SessionCgroup
from tasksieve.verifiers.sandbox.process.cold import ColdSetup
from tasksieve.verifiers.sandbox.process.launchers import WSINIT
from tasksieve.verifiers.sandbox.process.reap import Keeper, init_from_info
from tasksieve.verifiers.sandbox.process.runs import PATH, SandboxProcess
from tasksieve.verifiers.sandbox.process.seccomp import noipc_filter
from tasksieve.verifiers.sandbox.process.uids import UIDS
from tasksieve.verifiers.sandbox.process.wszygote import WorkspaceZygote, ZygoteError, kill_session
from tasksieve.verifiers.sandbox.workspace import (
    ENV_MOUNT,
    SNAPSHOT_MOUNT,
    WORKSPACE_ROOT,
    WorkspaceError,
    WorkspaceSpec,
)
from tasksieve.verifiers.sandbox.wsclient import GuestSession
from tasksieve.verifiers.sandbox.wshostdiff import SnapshotSession

KEEPER = Keeper()


def session_env(spec: WorkspaceSpec) -> dict[str, str]:
    """The shell's environment: ``/env/bin`` first on PATH and ``/env/site-packages`` on
    PYTHONPATH when an environment is mounted, then the spec's own variables."""
    env = {"PATH": PATH, "HOME": "/tmp", "TMPDIR": "/tmp", "LANG": "C.UTF-8"}
    if spec.env is not None:
        env["PATH"] = f"{ENV_MOUNT}/bin:{PATH}"
        env["PYTHONPATH"] = f"{ENV_MOUNT}/site-packages"
    env.update(spec.env_vars)
    return env


def spec_key(spec: WorkspaceSpec) -> tuple[object, ...]:
    """What makes two specs open the same workspace (a pool's key)."""
    env_vars = tuple(sorted(spec.env_vars.items()))
    return (os.path.realpath(spec.snapshot), spec.env, env_vars, spec.limits)


def _dirs(spec: WorkspaceSpec) -> tuple[str, str | None]:
    snap = os.path.realpath(spec.snapshot)
    if not os.path.isdir(snap):
        raise WorkspaceError(f"snapshot {spec.snapshot!r} is not a directory")
    env = None if spec.env is None else os.path.realpath(spec.env)
    if env is not None and not os.path.isdir(env):
        raise WorkspaceError(f"environment {spec.env!r} is not a directory")
    return snap, env


@functools.lru_cache(maxsize=8)
def _hidden(plan: tuple[tuple[str, str, str], ...]) -> list[str]:
    return base_site_dirs(list(plan))


def _config(setup: ColdSetup, spec: WorkspaceSpec, uid: int | None) -> dict[str, Any]:
    lim = spec.limits
    mem, cpu, disk = lim.memory_mb * 1024 * 1024, max(1, int(lim.cpu_s)), lim.disk_mb << 20
    snap, env = _dirs(spec)
    ro = [[s, d] for kind, s, d in setup.plan if kind == "ro"]
    ro += [[snap, SNAPSHOT_MOUNT], [snap, WORKSPACE_ROOT]]  # both detached once the layer is up
    if env is not None:
        ro.append([env, ENV_MOUNT])
    return {
        "mode": "bwrap" if setup.method == "bwrap" else "unshare",
        "ro": ro,
        "links": [[s, d] for kind, s, d in setup.plan if kind == "link"],
        "hide": _hidden(tuple(setup.plan)),
        "files": [],
        "scratch_bytes": 1 << 20,
        "disk_bytes": disk,
        "owner": uid,
        "uid": uid,
        "seccomp": setup.seccomp.hex() if setup.seccomp else "",
        "seccomp_noipc": (noipc_filter() or b"").hex() if setup.seccomp else "",
        "rlimits": {
            "RLIMIT_AS": [mem, mem],
            "RLIMIT_CPU": [cpu, cpu + 1],
            "RLIMIT_NPROC": [lim.max_processes] * 2,
            "RLIMIT_FSIZE": [disk, disk],
            "RLIMIT_CORE": [0, 0],
        },
        "env": session_env(spec),
        "idle_s": lim.idle_s,
        "lifetime_s": lim.lifetime_s,
        "command_wall_s": lim.command_wall_s,
        "max_output_bytes": lim.max_output_bytes,
    }


# Loads the guest from a code fd (argv[2]) compiled on the host, then runs it as __main__.
_LOADER = (
    "import marshal,os,sys\n"
    "f=int(sys.argv.pop(2))\n"
    "c=marshal.loads(os.pread(f,os.fstat(f).st_size,0))\n"
    "os.close(f)\n"
    "del f,marshal\n"
    "exec(c)\n"
)


@functools.lru_cache(maxsize=4)
def _compiled_guest(python: str) -> bytes | None:
    """The guest's code object, marshalled, when ``python`` is this interpreter (marshal's
    format is the interpreter's own); None otherwise, and the guest is sent as source.

    Compiling the 40 kB guest in every session cost each one about 6 ms and 1.4 MB of heap
    that the interpreter keeps (measured: private memory of the guest 7.9 MB from source
    against 6.5 MB from the marshalled code)."""
    if os.path.realpath(python) != os.path.realpath(sys.executable):
        return None
    return marshal.dumps(compile(WSINIT, "wsinit", "exec", dont_inherit=True))


def _guest_argv(setup: ColdSetup, cfg_fd: int, code_fd: int) -> list[str]:
    if code_fd < 0:
        return [setup.python, "-I", "-S", "-c", WSINIT, str(cfg_fd)]
    return [setup.python, "-I", "-S", "-c", _LOADER, str(cfg_fd), str(code_fd)]


def _bwrap_argv(
    setup: ColdSetup, cfg: dict[str, Any], cfg_fd: int, info_fd: int, code_fd: int = -1
) -> list[str]:
    assert setup.tools.bwrap
    ns = ["--unshare-all", "--uid", "0", "--gid", "0"]  # root of its user namespace
    if setup.root:
        ns = ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts"]
        ns.append("--unshare-cgroup-try")
    binds = list(setup.binds)
    for src, dst in cfg["ro"]:
        if dst in (SNAPSHOT_MOUNT, ENV_MOUNT):
            binds += ["--ro-bind", src, dst]
    return [
        setup.tools.bwrap, "--info-fd", str(info_fd), *ns, "--as-pid-1", "--cap-add", "ALL",
        "--die-with-parent", "--new-session", *binds,
        "--dir", WORKSPACE_ROOT, "--dir", "/tmp", "--proc", "/proc", "--dev", "/dev",
        "--chdir", "/", "--clearenv", "--setenv", "PATH", PATH,
        "--", *_guest_argv(setup, cfg_fd, code_fd),
    ]  # fmt: skip


def _unshare_argv(setup: ColdSetup, uid: int | None, cfg_fd: int, code_fd: int = -1) -> list[str]:
    assert setup.tools.pdeathsig and setup.tools.unshare
    user = [] if uid is not None or setup.root else ["--user", "--map-root-user"]
    return [
        setup.tools.pdeathsig, "--pdeathsig", "KILL", "--",
        setup.tools.unshare, *user, "--mount", "--pid", "--net", "--ipc", "--uts", "--fork",
        "--kill-child", "--", *_guest_argv(setup, cfg_fd, code_fd),
    ]  # fmt: skip


def open_process_workspace(
    setup: ColdSetup, spec: WorkspaceSpec, zygote: WorkspaceZygote | None = None
) -> GuestSession:
    """Start one session's namespaces and guest agent; the caller owns (and closes) it.

    With a ``zygote`` (as root; see ``wszygote``) the session is forked from it; where the
    zygote cannot start or fork, and without one, it opens cold."""
    if setup.method not in ("bwrap", "unshare-mount"):
        raise WorkspaceError("workspaces need namespaces (bubblewrap or unshare), not 'none'")
    if zygote is not None and setup.root:
        try:
            return _open_forked(setup, spec, zygote)
        except ZygoteError as e:
            zygote.error = str(e)
    return _open_cold(setup, spec)


def _open_forked(setup: ColdSetup, spec: WorkspaceSpec, zygote: WorkspaceZygote) -> GuestSession:
    """One session forked by the zygote: the cold ``unshare`` set-up, without the start."""
    uid = UIDS.take()
    lim = spec.limits
    group: SessionCgroup | None = None
    pidfd = -1
    try:
        cfg = {**_config(setup, spec, uid), "mode": "unshare"}
        group = SessionCgroup.create(lim.memory_mb << 20, lim.max_processes + 4)
        cfg["cgroup_procs"] = [] if group is None else group.procs
        cfg_fd = os.memfd_create("workspace-config", os.MFD_CLOEXEC)
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        try:
            os.write(cfg_fd, json.dumps(cfg).encode())
            pidfd, pid = zygote.fork_session(cfg_fd, req_r, rep_w)
        except BaseException:
            os.close(req_w)
            os.close(rep_r)
            raise
        finally:
            for fd in (cfg_fd, req_r, rep_w):
                os.close(fd)
    except BaseException:
        if group is not None:
            group.remove()
        UIDS.give(uid)
        raise
    done = threading.Lock()

    def kill() -> None:
        if not done.acquire(blocking=False):
            return
        gone = kill_session(pidfd)
        if group is not None:
            group.remove()
        if gone:
            UIDS.give(uid)

    return SnapshotSession(spec, req_w, rep_r, kill, "zygote", pid)


def _open_cold(setup: ColdSetup, spec: WorkspaceSpec) -> GuestSession:
    """A session started cold: bubblewrap or ``unshare`` and a fresh interpreter."""
    uid = UIDS.take() if setup.root else None
    keep: list[int] = []
    info_r = -1
    try:
        cfg = _config(setup, spec, uid)
        cfg_fd = os.memfd_create("workspace-config")
        keep.append(cfg_fd)
        os.write(cfg_fd, json.dumps(cfg).encode())
        code, code_fd = _compiled_guest(setup.python), -1
        if code is not None:
            code_fd = os.memfd_create("workspace-guest")
            keep.append(code_fd)
            os.write(code_fd, code)
        if setup.method == "bwrap":
            info_r, info_w = os.pipe()
            keep.append(info_w)
            argv = _bwrap_argv(setup, cfg, cfg_fd, info_w, code_fd)
        else:
            argv = _unshare_argv(setup, uid, cfg_fd, code_fd)
        popen = KEEPER.popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd="/",
            env={"PATH": PATH, "LANG": "C.UTF-8"},
            pass_fds=tuple(keep),
            start_new_session=True,
            close_fds=True,
        )
    except BaseException:
        for fd in (*keep, info_r):
            if fd >= 0:
                os.close(fd)
        if uid is not None:
            UIDS.give(uid)
        raise
    for fd in keep:
        os.close(fd)
    proc = SandboxProcess(popen, time.monotonic(), uid=uid)
    if info_r >= 0:
        proc.init_fd, proc.init_known = init_from_info(info_r, popen.pid, 30.0), True
    group = _cgroup(spec, proc) if setup.root else None

    def kill() -> None:
        proc.close()
        if group is not None:
            group.remove()

    assert popen.stdin is not None and popen.stdout is not None
    req, rep = os.dup(popen.stdin.fileno()), os.dup(popen.stdout.fileno())
    return SnapshotSession(spec, req, rep, kill, setup.method, popen.pid)


def _init_pid(proc: SandboxProcess) -> int | None:
    """The host pid of the session's init (the guest agent), once it exists (5 s at most)."""
    if proc.init_fd is not None:
        with open(f"/proc/self/fdinfo/{proc.init_fd}") as fh:
            for line in fh:
                if line.startswith("Pid:"):
                    return int(line.split()[1])
        return None
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline and proc.popen.poll() is None:
        try:
            with open(f"/proc/{proc.popen.pid}/task/{proc.popen.pid}/children") as fh:
                kids = fh.read().split()
        except OSError:
            return None
        if kids:
            return int(kids[0])
        time.sleep(0.001)
    return None


def _cgroup(spec: WorkspaceSpec, proc: SandboxProcess) -> SessionCgroup | None:
    """The session's cgroup (``cgroups``), its init moved in before it starts anything."""
    lim = spec.limits
    group = SessionCgroup.create(lim.memory_mb << 20, lim.max_processes + 4)
    pid = _init_pid(proc) if group is not None else None
    if group is None or pid is None:
        return group
    with contextlib.suppress(OSError):  # the session failed to start: its hello says why
        group.add(pid)
    return group


OPEN_MODES = ("auto", "zygote", "cold")


def make_zygote(mode: str, python: str, root: bool, namespaced: bool) -> WorkspaceZygote | None:
    """The sandbox's zygote for ``mode`` (``auto``/``zygote``: as root with namespaces;
    ``cold``: none). ``mode`` ``auto`` yields to ``TASKSIEVE_WORKSPACE_OPEN`` when set.
    Nothing starts here: the zygote starts at the first open."""
    if mode == "auto":
        mode = os.environ.get("TASKSIEVE_WORKSPACE_OPEN", "") or "auto"
    if mode not in OPEN_MODES:
        raise ValueError(f"workspace_open must be one of {', '.join(OPEN_MODES)}, got {mode!r}")
    if mode == "cold" or not (root and namespaced):
        return None
    return WorkspaceZygote(python)


def describe_open(zygote: WorkspaceZygote | None, root: bool, namespaced: bool) -> str:
    """How ``open_workspace`` starts a session, for ``describe()`` and the doctor."""
    if not namespaced:
        return "none: workspaces need namespaces"
    if zygote is None:
        return "cold" if root else "cold: the zygote needs root"
    if zygote.error:
        return f"cold: the zygote failed ({zygote.error[:200]})"
    return "zygote" if zygote.pid is not None else "zygote (started at the first open)"
