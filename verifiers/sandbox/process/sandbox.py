"""The ``process`` sandbox: Linux namespaces (bubblewrap, else unshare) plus rlimits.

``isolation``: ``bwrap`` (bubblewrap with a warm fork server: as root, or unprivileged in a
user namespace with subordinate uids, ``userns.py``), ``unshare`` (util-linux ``unshare`` plus
a guest that pivots into a private read-only root, reported as ``unshare-mount``: the same
filesystem view as bwrap), ``auto`` (bwrap, else unshare), or ``none`` (rlimits only on the
host's filesystem; only with ``allow_weak_isolation``, which warns). If no namespace method
works the constructor refuses unless weak isolation was accepted; ``describe()`` reports the
method actually used and ``weak``. Where the fork server starts, one run through it probes the
method; cold probes of each method run only without it, and a method that worked is
remembered for the boot (``probecache``: keyed by everything the answer depends on, so a
changed kernel knob, program or interpreter probes again). This module chooses the method and
holds the runs; a cold run's command line and start are ``cold.py``'s, the system programs
``tools.py``'s, the fork server ``forkserver.py``'s. The interpreter must not live under
``/tmp`` (each run's scratch replaces it): a namespace method refuses it.

With bubblewrap (the default) a run gets new pid/net/ipc/uts (and, unprivileged, user)
namespaces, a read-only view of only the system dirs and the interpreter's own prefix, a
private size-limited tmpfs as its writable cwd (``/tmp``), a cleared environment, and
rlimits on address space, CPU seconds, processes, file size and core dumps. Input files are
read-only inside. Run as root, or through the unprivileged fork server, the command drops to a
per-run unprivileged uid (so RLIMIT_NPROC applies and root-only files stay closed); on the
per-run path unprivileged, as the caller's uid in a fresh user namespace. A wall-clock kill
takes down the whole pid namespace. No process of a run outlives its verdict or ``close()``:
the host waits until the run's pid namespace is empty, and parent-death signals end every
run if the host process dies.

It does NOT guard against: kernel exploits (the seccomp filter is a deny list of dangerous
calls, see seccomp.py, not an allow list); memory or CPU summed over one run's processes
(RLIMITs are per process; as root the fork server's cgroup, ``servercg.py``, bounds its runs
together, memory outside an address space included); reading world-readable files under the
bound system dirs; timing side channels. A run started from a thread is tied to that thread
(parent-death signals fire when it exits), so a thread must outlive the runs it starts.
Unprivileged, the ``unshare`` fallback needs user namespaces that may mount a fresh /proc.
Weak mode (``allow_weak_isolation``) applies rlimits only: no network or pid isolation, and a
process that leaves the process group survives the kill.
"""

from __future__ import annotations

import logging
import os
import subprocess
import threading
import time
import warnings
import weakref
from typing import Any

import tasksieve.verifiers.sandbox.process.methods as methods
from tasksieve.verifiers.sandbox.base import (
    Capabilities,
    CapabilityMissing,
    Execution,
    Limits,
    Sandbox,
    base_python,
)
from tasksieve.verifiers.sandbox.process.binds import (
    bind_args,
    mount_plan,
    sandbox_site_paths,
    venv_site_paths,
)
from tasksieve.verifiers.sandbox.process.cgroups import describe as cgroup_describe
from tasksieve.verifiers.sandbox.process.cold import ColdSetup, spawn_cold
from tasksieve.verifiers.sandbox.process.forkserver import ForkServer, start_run
from tasksieve.verifiers.sandbox.process.multi import MultiProcess, spawn_multi
from tasksieve.verifiers.sandbox.process.pair import PairProcess, start_pair
from tasksieve.verifiers.sandbox.process.runs import SandboxProcess, supervise, warm_job
from tasksieve.verifiers.sandbox.process.seccomp import build_filter
from tasksieve.verifiers.sandbox.process.tools import HostTools
from tasksieve.verifiers.sandbox.process.uids import UIDS
from tasksieve.verifiers.sandbox.process.userns import server_prefix, uid_kind
from tasksieve.verifiers.sandbox.process.workspace import (
    describe_open,
    make_zygote,
    open_process_workspace,
    spec_key,
)
from tasksieve.verifiers.sandbox.process.wspool import WorkspacePool
from tasksieve.verifiers.sandbox.support import check_name
from tasksieve.verifiers.sandbox.workspace import Workspace, WorkspaceSpec
from tasksieve.verifiers.sandbox.wsclient import GuestSession

_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_NAMESPACED = methods.NAMESPACED
MAX_DEDICATED = 4  # siblings one sandbox builds (one per warm script); more run on this one
log = logging.getLogger(__name__)
WEAK_WARNING = (
    "WEAK ISOLATION: the process sandbox runs commands with rlimits only, on the host's "
    "filesystem and network, as this user; only trusted code should run like this."
)


class ProcessSandbox(Sandbox):
    """Runs commands isolated by bubblewrap (or unshare) namespaces and rlimits."""

    name = "process"

    def __init__(
        self,
        allow_weak_isolation: bool = False,
        isolation: str = "auto",
        python: str | None = None,
        warm: bool = True,
        probe_cache: bool = True,
        workspace_open: str = "auto",
        server_memory_mb: int = 0,  # the fork server's cgroup: 0 half the machine, < 0 none
        extra_warm: tuple[str, ...] = (),  # this sandbox's own warm scripts (``dedicated``)
    ) -> None:
        if isolation not in ("auto", "bwrap", "unshare", "none"):
            raise ValueError(f"isolation must be auto, bwrap, unshare or none, got {isolation!r}")
        if isolation == "none" and not allow_weak_isolation:
            raise ValueError("isolation='none' needs allow_weak_isolation=True")
        self._args: dict[str, Any] = dict(  # what ``dedicated`` builds a sibling with
            allow_weak_isolation=allow_weak_isolation, isolation=isolation, python=python,
            probe_cache=probe_cache, workspace_open=workspace_open,
            server_memory_mb=server_memory_mb,
        )  # fmt: skip
        self._dedicated: dict[str, Sandbox] = {}
        self._sib_lock = threading.Lock()
        self.python = python or base_python()
        self.allow_weak_isolation = allow_weak_isolation
        self._root = os.geteuid() == 0
        self.tools = HostTools.find(self._root)
        self._binds = bind_args(self.python, _SYSTEM_DIRS)
        self._plan = mount_plan(self.python, _SYSTEM_DIRS)
        self._seccomp = build_filter()
        self._server: ForkServer | None = None
        self._runs: weakref.WeakValueDictionary[int, SandboxProcess] = weakref.WeakValueDictionary()
        self._runs_lock = threading.Lock()
        self._pools: dict[tuple[object, ...], WorkspacePool] = {}
        self._workspaces: weakref.WeakSet[GuestSession] = weakref.WeakSet()
        self._probe_cache = probe_cache
        # With root and bubblewrap the probe goes through the fork server the runs need
        # anyway; only if that fails are the methods probed cold, one by one.
        why_warm: str | None = None
        bwrap, mem = self.tools.bwrap, server_memory_mb << 20
        if warm and isolation in ("auto", "bwrap") and bwrap:
            prefix, why_warm = server_prefix(self._root, self.tools.unshare)
            if prefix is not None:
                srv = (bwrap, self._binds, self.python, self._seccomp, self.tools.unshare)
                self._server = ForkServer(*srv, mem, extra_warm)
                why_warm = self._probe("bwrap")
                if why_warm is not None:
                    self._server.close()
                    self._server = None
        if self._server is None:
            self.method = self._select(isolation)
        if self.method == "none":
            warnings.warn(WEAK_WARNING, RuntimeWarning, stacklevel=2)
            log.warning(WEAK_WARNING)
        self.warm_unavailable = "" if warm else "disabled"
        if warm and self.method != "bwrap":
            self.warm_unavailable = "needs bubblewrap (the fork server runs in it)"
        elif warm and self._server is None:
            self.warm_unavailable = why_warm or "the fork server did not start"
        namespaced = self.method in _NAMESPACED
        self._zygote = make_zygote(workspace_open, self.python, self._root, namespaced)
        self.capabilities = Capabilities(
            spawn=True,
            paired_runs=self._server is not None,
            warm_scripts=self._server is not None,
            own_pid_namespace=self.method in _NAMESPACED,
            private_loopback=self.method in _NAMESPACED,
            site_packages=tuple(
                sandbox_site_paths() if self.method in _NAMESPACED else venv_site_paths()
            ),
            workspaces=self.method in _NAMESPACED,
        )

    # ------------------------------------------------------------------ public API
    def describe(self) -> dict[str, str | bool]:
        """What runs actually get: isolation method, private filesystem, weak or not.

        ``isolation`` is ``bwrap``, ``unshare-mount`` (util-linux namespaces and a private
        read-only root) or ``none`` (rlimits only, host filesystem: always ``weak``).
        """
        isolated = self.method in _NAMESPACED
        uid = uid_kind(isolated, self._root, self._server is not None)
        return {
            "backend": self.name,
            "isolation": self.method,
            "weak": not isolated,
            "filesystem_isolated": isolated,
            "uid": uid,
            "executor": "forkserver" if self._server else "per-run",
            "seccomp": self._seccomp is not None and isolated,
            "workspace_cgroup": cgroup_describe()
            if isolated and self._root
            else "none: unprivileged",
            "workspace_open": describe_open(self._zygote, self._root, isolated),
            "server_cgroup": self._server.cgroup.state if self._server else "none: no server",
        }

    def dedicated(self, warm: str) -> Sandbox:
        """A sibling with a fork server of its own that also ran ``warm`` at boot (built on the
        first call, closed with this one); this sandbox itself when it has no fork server or
        the sibling's did not start (``warm`` then runs cold)."""
        with self._sib_lock:  # ``close`` waits for a sibling being built, then closes it too
            if warm not in self._dedicated:
                self._dedicated[warm] = self._sibling(warm)
            return self._dedicated[warm]

    def _sibling(self, warm: str) -> Sandbox:
        if self._server is None or len(self._dedicated) >= MAX_DEDICATED:
            return self
        try:
            sib = ProcessSandbox(**self._args, extra_warm=(warm,))
        except Exception as e:  # its runs still run, cold, here
            log.warning("a dedicated fork server did not start (%s); its runs run cold", e)
            return self
        if sib._server is None:
            log.warning("a dedicated fork server did not start (%s)", sib.warm_unavailable)
            sib.close()
            return self
        return sib

    def close(self) -> None:
        """Kill every run still going and wait until none of its processes exists.

        The fork server is stopped (it kills its runs first); per-run sandboxes that were
        spawned and not yet closed are killed here, and so are workspaces opened here and not
        closed yet, and the ``dedicated`` siblings. The sandbox stays usable (a later run
        starts a new server).
        """
        with self._sib_lock:
            for sib in self._dedicated.values():
                if sib is not self:
                    sib.close()
        with self._runs_lock:
            runs = list(self._runs.values())
        for proc in runs:
            proc.reclaim()
        if self._server is not None:
            self._server.close()
        pools, self._pools = list(self._pools.values()), {}
        for pool in pools:
            pool.close()
        for ws in list(self._workspaces):
            ws.close()
        if self._zygote is not None:
            self._zygote.close()

    def run(
        self,
        files: dict[str, bytes | str],
        command: list[str],
        limits: Limits,
        stdin: bytes = b"",
        collect: tuple[str, ...] = (),
    ) -> Execution:
        """Write ``files`` into a fresh scratch dir, run ``command`` there, return what it did."""
        t0 = time.monotonic()
        try:
            proc = self.spawn(files, command, limits, collect=collect)
        except (OSError, subprocess.SubprocessError) as e:
            return Execution(None, b"", b"", 0.0, infra_error=f"sandbox start failed: {e}")
        try:
            return supervise(proc, limits, stdin, collect, t0, self.method)
        finally:
            proc.close()

    def spawn(
        self,
        files: dict[str, bytes | str],
        command: list[str],
        limits: Limits,
        collect: tuple[str, ...] = (),
    ) -> SandboxProcess:
        """Start ``command`` in a fresh sandbox with piped stdin/stdout/stderr; don't wait.

        The caller owns the result and must call ``close()``; the wall limit is the caller's.
        """
        for name in (*files, *collect):
            check_name(name)
        if self._server is not None:
            return self._spawn_warm(files, command, limits, collect)
        uid = UIDS.take() if self._root and self.method != "none" else None
        try:
            return self._spawn_cold(files, command, limits, collect, uid)
        except BaseException:
            if uid is not None:
                UIDS.give(uid)
            raise

    def _spawn_cold(
        self,
        files: dict[str, bytes | str],
        command: list[str],
        limits: Limits,
        collect: tuple[str, ...],
        uid: int | None,
    ) -> SandboxProcess:
        return self._track(spawn_cold(self._cold(), files, command, limits, collect, uid))

    def _spawn_warm(
        self,
        files: dict[str, bytes | str],
        command: list[str],
        limits: Limits,
        collect: tuple[str, ...],
    ) -> SandboxProcess:
        assert self._server is not None
        job = {
            **warm_job(command, limits),
            "uid": UIDS.take(),
            "scratch_bytes": limits.scratch_mb * 1024 * 1024,
            "collect": list(collect),
            "cap": limits.max_file_bytes,
        }
        proc, collect_r = start_run(self._server, job, files, bool(collect))
        return SandboxProcess(proc, time.monotonic(), collect_r)

    def open_workspace(self, spec: WorkspaceSpec) -> Workspace:
        """Open a live copy-on-write workspace over ``spec.snapshot`` (see ``workspace.py``).

        The caller owns it and must ``close()`` it. Needs namespaces (``workspaces``).
        """
        if not self.capabilities.workspaces:
            raise CapabilityMissing("workspaces need bubblewrap or unshare (workspaces)")
        pool = self._pools.get(spec_key(spec))
        ws = pool.take() if pool is not None else self._open_cold_workspace(spec)
        self._workspaces.add(ws)
        return ws

    def prewarm_workspaces(self, spec: WorkspaceSpec, size: int = 4) -> WorkspacePool:
        """Keep ``size`` sessions of ``spec`` started ahead (``wspool``): ``open_workspace``
        with an equal spec then takes one. ``close()`` stops every pool."""
        key = spec_key(spec)
        if key not in self._pools:
            self._pools[key] = WorkspacePool(self._open_cold_workspace, spec, size)
        return self._pools[key]

    def _open_cold_workspace(self, spec: WorkspaceSpec) -> GuestSession:
        return open_process_workspace(self._cold(), spec, self._zygote)

    def _cold(self) -> ColdSetup:
        t = (self.method, self.tools, self.python, self._root, self._binds, self._plan)
        return ColdSetup(*t, self._seccomp)

    def _track(self, proc: SandboxProcess) -> SandboxProcess:
        with self._runs_lock:
            self._runs[id(proc)] = proc
        return proc

    def spawn_pair(
        self,
        cand: tuple[dict[str, bytes | str], list[str]],
        tests: tuple[dict[str, bytes | str], list[str]],
        limits: Limits,
    ) -> PairProcess:
        """A candidate and its tests as one warm pair run (``pair.py``): (files, command) each;
        the tests' command gets the candidate's pid appended. Needs ``paired_runs``."""
        if self._server is None:
            raise CapabilityMissing("pair runs need the fork server (capabilities.paired_runs)")
        for name in (*cand[0], *tests[0]):
            check_name(name)
        return start_pair(
            self._server,
            warm_job(cand[1], limits),
            warm_job(tests[1], limits),
            cand[0],
            tests[0],
            limits.scratch_mb * 1024 * 1024,
        )

    def spawn_multi(
        self,
        shared: dict[str, bytes | str],
        cands: list[tuple[dict[str, bytes | str], list[str], Limits]],
        tests: tuple[dict[str, bytes | str], list[str]],
    ) -> MultiProcess:
        """K candidates of one task (files, command, own limits) and one tests process, whose
        CPU limit is the candidates' summed, in one entry (``process.multi``)."""
        if self._server is None:
            raise CapabilityMissing("multi-sample runs need the fork server (paired_runs)")
        for name in (*shared, *tests[0], *(n for files, _, _ in cands for n in files)):
            check_name(name)
        return spawn_multi(self._server, shared, cands, tests)

    # ------------------------------------------------------------------ probing
    def _select(self, isolation: str) -> str:
        return methods.select(self, isolation)

    def _probe(self, method: str) -> str | None:
        return methods.probe(self, method)
