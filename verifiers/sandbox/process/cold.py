"""One cold (not fork-server) run of the ``process`` sandbox: its argv, started with Popen.

``spawn_cold`` builds the command line of the chosen method (bubblewrap, ``unshare`` plus the
mount guest, or rlimits only on a host scratch dir), passes the descriptors it needs and
returns the started run; ``limit_prefix`` is the rlimit (and, as root, uid drop) wrapper
around a command. Supervision (wall clock, output caps, kill) is ``runs.supervise``'s.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import time
from dataclasses import dataclass

from tasksieve.verifiers.sandbox.base import Limits
from tasksieve.verifiers.sandbox.process.bwrap import bwrap_argv
from tasksieve.verifiers.sandbox.process.forkserver import JOB_ENV
from tasksieve.verifiers.sandbox.process.launchers import COLLECTOR, RLIMIT_LAUNCHER
from tasksieve.verifiers.sandbox.process.lifeline import guard_prefix
from tasksieve.verifiers.sandbox.process.reap import init_from_info
from tasksieve.verifiers.sandbox.process.runs import WORKDIR, SandboxProcess
from tasksieve.verifiers.sandbox.process.tools import HostTools
from tasksieve.verifiers.sandbox.process.unshare import unshare_argv
from tasksieve.verifiers.sandbox.support import host_scratch


@dataclass(frozen=True)
class ColdSetup:
    """What every cold run of one sandbox shares: method, tools, interpreter, views, filter."""

    method: str  # bwrap, unshare-mount or none
    tools: HostTools
    python: str
    root: bool
    binds: list[str]  # bubblewrap's read-only binds (binds.bind_args)
    plan: list[tuple[str, str, str]]  # the same view for the mount guest (binds.mount_plan)
    seccomp: bytes | None

    def __post_init__(self) -> None:
        need = {"bwrap": ("bwrap",), "unshare-mount": ("unshare", "pdeathsig"), "none": ()}
        if self.method not in need:
            raise ValueError(f"method must be bwrap, unshare-mount or none, got {self.method!r}")
        missing = [t for t in need[self.method] if getattr(self.tools, t) is None]
        if missing:
            raise ValueError(
                f"method {self.method!r} needs {', '.join(missing)} on PATH: install it "
                "(see `python -m tasksieve.verifiers.sandbox.process.doctor`) or pick another"
            )


def limit_prefix(setup: ColdSetup, limits: Limits, uid: int | None) -> list[str]:
    """The argv prefix that applies ``limits`` (and, as root, drops to ``uid``) then execs."""
    mem = limits.memory_mb * 1024 * 1024
    cpu = max(1, math.ceil(limits.cpu_s))
    prlimit, setpriv = setup.tools.prlimit, setup.tools.setpriv
    if prlimit and (uid is None or setpriv):
        pre = [
            prlimit,
            f"--as={mem}",
            f"--cpu={cpu}:{cpu + 1}",
            f"--nproc={limits.max_processes}",
            f"--fsize={limits.max_file_bytes}",
            "--core=0",
            "--",
        ]
        if uid is not None and setpriv:
            pre += [setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
        return pre
    cfg = {
        "rl": {
            "RLIMIT_AS": [mem, mem],
            "RLIMIT_CPU": [cpu, cpu + 1],
            "RLIMIT_NPROC": [limits.max_processes] * 2,
            "RLIMIT_FSIZE": [limits.max_file_bytes] * 2,
            "RLIMIT_CORE": [0, 0],
        },
        "uid": uid,
    }
    return [setup.python, "-I", "-S", "-c", RLIMIT_LAUNCHER, json.dumps(cfg), "--"]


def _argv(
    setup: ColdSetup,
    job: tuple[dict[str, bytes | str], list[str], Limits, tuple[str, ...]],
    uid: int | None,
    keep: list[int],
    ends: dict[str, int],
) -> list[str]:
    """The run's argv; the host's pipe ends go to ``ends`` (``collect``, bwrap's ``info``).

    The write ends (and memfds) that the run must inherit are appended to ``keep``.
    """
    files, command, limits, collect = job
    if setup.method == "bwrap":
        guard = guard_prefix(keep)  # a host that died while the run started: see lifeline
        inner = guard + limit_prefix(setup, limits, uid) + list(command)
        if collect:
            ends["collect"], collect_w = os.pipe()
            keep.append(collect_w)
            inner = [
                *guard,
                *limit_prefix(setup, limits, uid),
                setup.python, "-I", "-S", "-c", COLLECTOR, str(collect_w),
                json.dumps(list(collect)), str(limits.max_file_bytes), "--", *command,
            ]  # fmt: skip
        ends["info"], info_w = os.pipe()
        keep.append(info_w)
        assert setup.tools.bwrap
        tool = (setup.tools.bwrap, setup.root, setup.binds, setup.seccomp)
        return bwrap_argv(tool, (files, limits, inner), keep, info_w)
    collect_w = -1
    if collect:
        ends["collect"], collect_w = os.pipe()
        keep.append(collect_w)
    assert setup.tools.pdeathsig and setup.tools.unshare
    return unshare_argv(
        (setup.tools.pdeathsig, setup.tools.unshare, setup.python),
        setup.plan,
        (files, command, limits),
        uid,
        setup.seccomp,
        (collect, collect_w),
        keep,
    )


def spawn_cold(
    setup: ColdSetup,
    files: dict[str, bytes | str],
    command: list[str],
    limits: Limits,
    collect: tuple[str, ...],
    uid: int | None,
) -> SandboxProcess:
    """Start one run with piped stdin/stdout/stderr; the caller owns (and closes) it."""
    keep: list[int] = []
    ends: dict[str, int] = {}
    scratch: str | None = None
    try:
        if setup.method == "none":
            scratch = host_scratch(files, uid)
            argv, cwd = limit_prefix(setup, limits, uid) + list(command), scratch
        else:
            argv = _argv(setup, (files, command, limits, collect), uid, keep, ends)
            cwd = "/"
        home = WORKDIR if scratch is None else scratch
        env = {**JOB_ENV, "HOME": home, "TMPDIR": home}
        popen = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=env,
            pass_fds=tuple(keep),
            start_new_session=True,
            close_fds=True,
        )
    except BaseException:
        for fd in [*keep, *ends.values()]:
            os.close(fd)
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)
        raise
    for fd in keep:
        os.close(fd)
    namespaced = setup.method != "none"
    proc = SandboxProcess(popen, time.monotonic(), ends.get("collect"), scratch, namespaced)
    proc.uid = uid
    if "info" in ends:  # the init's pidfd, taken while bwrap is alive to vouch for it
        proc.init_fd, proc.init_known = init_from_info(ends["info"], popen.pid, 30.0), True
    return proc
