"""The ``process`` sandbox: Linux namespaces (bubblewrap, else unshare) plus rlimits.

With bubblewrap (the default) a run gets new pid/net/ipc/uts (and, unprivileged, user)
namespaces, a read-only view of only the system dirs and the interpreter's own prefix, a
private size-limited tmpfs as its writable cwd (``/tmp``), a cleared environment, and
rlimits on address space, CPU seconds, processes, file size and core dumps. Input files are
read-only inside. Run as root, the command drops to a per-run unprivileged uid (so RLIMIT_NPROC
applies and root-only files stay closed); unprivileged, it runs as the caller's uid mapped into
a fresh user namespace. A wall-clock kill takes down the whole pid namespace.

It does NOT guard against: kernel exploits (the seccomp filter is a deny list of dangerous
calls, see seccomp.py, not an allow list); memory or CPU summed over processes (RLIMITs are
per process, so the worst case is ``max_processes`` times the limit until the wall clock
fires); reading world-readable files under the bound system dirs; timing
side channels. The ``unshare`` fallback isolates network, pids, ipc and uts but NOT the
filesystem (host files readable by the run's uid are visible; scratch size is not bounded).
Weak mode (``allow_weak_isolation``) applies rlimits only: no network or pid isolation, and a
process that leaves the process group survives the kill.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from verifiers.base import Execution, Limits, Sandbox, SandboxUnavailable
from verifiers.forkserver import UIDS, ForkedProcess, ForkServer, start_run
from verifiers.forkserver_pair import PairProcess, start_pair
from verifiers.launchers import COLLECTOR, RLIMIT_LAUNCHER
from verifiers.pipes import Pump, drain_until
from verifiers.process_support import (
    bind_args,
    check_name,
    host_scratch,
    infra_error,
    limit_from,
    parse_frames,
    read_nofollow,
)
from verifiers.seccomp import build_filter

WORKDIR = "/tmp"
_PATH = "/usr/local/bin:/usr/bin:/bin"
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_UID_BASE = 1_200_000
_uid_counter = itertools.count()


def base_python() -> str:
    """The real interpreter behind ``sys.executable`` (a venv's python resolved to its base)."""
    exe = getattr(sys, "_base_executable", None) or sys.executable
    return os.path.realpath(exe)


def _warm_job(command: list[str], limits: Limits) -> dict[str, Any]:
    """The fork server's description of one job: argv, environment and rlimits."""
    mem = limits.memory_mb * 1024 * 1024
    cpu = max(1, math.ceil(limits.cpu_s))
    return {
        "argv": list(command),
        "env": {"PATH": _PATH, "HOME": WORKDIR, "LANG": "C.UTF-8", "TMPDIR": WORKDIR},
        "rlimits": {
            "RLIMIT_AS": [mem, mem],
            "RLIMIT_CPU": [cpu, cpu + 1],
            "RLIMIT_NPROC": [limits.max_processes] * 2,
            "RLIMIT_FSIZE": [limits.max_file_bytes] * 2,
            "RLIMIT_CORE": [0, 0],
        },
    }


def _next_uid() -> int:
    """A per-run uid so concurrent runs never share an RLIMIT_NPROC count (root mode only)."""
    return _UID_BASE + (os.getpid() % 4096) * 1024 + next(_uid_counter) % 1024


@dataclass
class SandboxProcess:
    """A started sandboxed command: its pipes, and how to kill and clean it up."""

    popen: subprocess.Popen[bytes]
    started: float
    collect_fd: int | None = None
    scratch: str | None = None
    _fds: list[int] = field(default_factory=list)

    def kill(self) -> None:
        """Kill the whole process group (with namespaces: the whole sandbox)."""
        if isinstance(self.popen, ForkedProcess):
            self.popen.kill()
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.popen.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            self.popen.kill()

    def close(self) -> None:
        """Kill what is left, reap it, close the pipes and remove the scratch dir."""
        self.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):  # a server that stopped answering
            self.popen.wait(timeout=30.0)
        for f in (self.popen.stdin, self.popen.stdout, self.popen.stderr):
            if f is not None:
                with contextlib.suppress(OSError):
                    f.close()
        for fd in self._fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        if self.collect_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.collect_fd)
        if self.scratch:
            shutil.rmtree(self.scratch, ignore_errors=True)


class ProcessSandbox(Sandbox):
    """Runs commands isolated by bubblewrap (or unshare) namespaces and rlimits."""

    name = "process"

    def __init__(
        self,
        allow_weak_isolation: bool = False,
        isolation: str = "auto",
        python: str | None = None,
        warm: bool = True,
    ) -> None:
        if isolation not in ("auto", "bwrap", "unshare", "none"):
            raise ValueError(f"isolation must be auto, bwrap, unshare or none, got {isolation!r}")
        if isolation == "none" and not allow_weak_isolation:
            raise ValueError("isolation='none' needs allow_weak_isolation=True")
        self.python = python or base_python()
        self.allow_weak_isolation = allow_weak_isolation
        self._root = os.geteuid() == 0
        self._bwrap = shutil.which("bwrap")
        self._unshare = shutil.which("unshare")
        prlimit, setpriv = shutil.which("prlimit", path=_PATH), shutil.which("setpriv", path=_PATH)
        self._prlimit = prlimit
        self._setpriv = setpriv if self._root else None
        self._binds = bind_args(self.python, _SYSTEM_DIRS)
        self._seccomp = build_filter()
        self._server: ForkServer | None = None
        self.method = self._select(isolation)
        self.warm_unavailable = "" if warm else "disabled"
        if warm and self.method == "bwrap" and not self._root:
            self.warm_unavailable = "needs root (per-run uids)"
        elif warm and self.method == "bwrap":
            assert self._bwrap
            self._server = ForkServer(self._bwrap, self._binds, self.python, self._seccomp)
            why = self._probe("bwrap")
            if why is not None:
                self._server.close()
                self._server = None
                self.warm_unavailable = why

    # ------------------------------------------------------------------ public API
    def describe(self) -> dict[str, str | bool]:
        """Backend, isolation method and whether the isolation is weak."""
        return {
            "backend": self.name,
            "isolation": self.method,
            "weak": self.method == "none",
            "filesystem_isolated": self.method == "bwrap",
            "uid": "per-run unprivileged uid" if self._root else "caller uid in a user namespace",
            "executor": "forkserver" if self._server else "per-run",
            "seccomp": self._seccomp is not None and self.method == "bwrap",
        }

    def close(self) -> None:
        """Stop the fork server (runs still going are killed with it)."""
        if self._server is not None:
            self._server.close()

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
            return self._supervise(proc, limits, stdin, collect, t0)
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
        uid = _next_uid() if self._root else None
        inner = self._inner(command, limits, uid)
        keep: list[int] = []
        scratch: str | None = None
        collect_r: int | None = None
        try:
            if collect and self.method == "bwrap":
                collect_r, collect_w = os.pipe()
                keep.append(collect_w)
                inner = [
                    *self._limit_prefix(limits, uid),
                    self.python,
                    "-I",
                    "-S",
                    "-c",
                    COLLECTOR,
                    str(collect_w),
                    json.dumps(list(collect)),
                    str(limits.max_file_bytes),
                    "--",
                    *command,
                ]
            if self.method == "bwrap":
                argv = self._bwrap_argv(files, limits, inner, keep)
                cwd = "/"
            else:
                scratch = host_scratch(files, uid)
                argv = self._ns_prefix(uid) + inner
                cwd = scratch
            env = {
                "PATH": _PATH,
                "HOME": WORKDIR if scratch is None else scratch,
                "LANG": "C.UTF-8",
                "TMPDIR": WORKDIR if scratch is None else scratch,
            }
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
            for fd in [*keep, *([collect_r] if collect_r is not None else [])]:
                os.close(fd)
            if scratch:
                shutil.rmtree(scratch, ignore_errors=True)
            raise
        for fd in keep:
            os.close(fd)
        return SandboxProcess(popen, time.monotonic(), collect_r, scratch)

    def _spawn_warm(
        self,
        files: dict[str, bytes | str],
        command: list[str],
        limits: Limits,
        collect: tuple[str, ...],
    ) -> SandboxProcess:
        assert self._server is not None
        job = {
            **_warm_job(command, limits),
            "uid": UIDS.take(),
            "scratch_bytes": limits.scratch_mb * 1024 * 1024,
            "collect": list(collect),
            "cap": limits.max_file_bytes,
        }
        proc, collect_r = start_run(self._server, job, files, bool(collect))
        return SandboxProcess(proc, time.monotonic(), collect_r)

    def spawn_pair(
        self,
        cand: tuple[dict[str, bytes | str], list[str]],
        tests: tuple[dict[str, bytes | str], list[str]],
        limits: Limits,
    ) -> PairProcess | None:
        """Start a candidate and its tests as one warm pair run (see ``forkserver_pair``).

        ``cand``/``tests`` are (files, command); the tests' command gets the candidate's pid
        appended. None when there is no fork server (use two ``spawn()`` runs instead).
        """
        if self._server is None:
            return None
        for name in (*cand[0], *tests[0]):
            check_name(name)
        return start_pair(
            self._server,
            _warm_job(cand[1], limits),
            _warm_job(tests[1], limits),
            cand[0],
            tests[0],
            limits.scratch_mb * 1024 * 1024,
        )

    # ------------------------------------------------------------------ supervision
    def _supervise(
        self,
        proc: SandboxProcess,
        limits: Limits,
        stdin: bytes,
        collect: tuple[str, ...],
        t0: float,
    ) -> Execution:
        p = proc.popen
        assert p.stdin and p.stdout and p.stderr
        pump = Pump()
        out = pump.add_reader(p.stdout.fileno(), limits.max_output_bytes)
        err = pump.add_reader(p.stderr.fileno(), limits.max_output_bytes)
        col_cap = (limits.max_file_bytes + 512) * max(1, len(collect))
        col = pump.add_reader(proc.collect_fd, col_cap) if proc.collect_fd is not None else None
        stdin_fd = os.dup(p.stdin.fileno())  # the pump owns (and closes) this copy
        p.stdin.close()
        pump.write(stdin_fd, stdin, close_when_done=True)
        deadline = t0 + limits.wall_s
        limit_hit: str | None = None
        readers = [r for r in (out, err, col) if r is not None]
        while True:
            if out.overflow or err.overflow:
                limit_hit = "output"
                break
            if all(r.eof for r in readers):
                break
            if p.poll() is not None:  # exited: a short grace for buffered output
                drain_until(pump, lambda: all(r.eof for r in readers), time.monotonic() + 0.2)
                break
            now = time.monotonic()
            if now >= deadline:
                limit_hit = "wall"
                break
            pump.poll(min(deadline - now, 0.25))
        if limit_hit is None:
            try:
                p.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                limit_hit = "wall"
        proc.kill()
        p.wait()
        pump.close()
        code = p.returncode if p.returncode >= 0 else 128 - p.returncode
        if limit_hit in ("wall", "output"):
            code_out: int | None = None if limit_hit == "wall" else code
        else:
            code_out = code
        files = parse_frames(bytes(col.buf)) if col is not None else {}
        if proc.scratch and collect:
            cap = limits.max_file_bytes
            found = {n: read_nofollow(proc.scratch, n, cap) for n in collect}
            files = {n: d for n, d in found.items() if d is not None}
        stderr = bytes(err.buf)
        return Execution(
            exit_code=code_out,
            stdout=bytes(out.buf),
            stderr=stderr,
            duration_s=time.monotonic() - t0,
            limit_hit=limit_hit or limit_from(code, stderr),
            stdout_truncated=out.overflow,
            stderr_truncated=err.overflow,
            infra_error=getattr(p, "infra_error", None) or infra_error(code, stderr, self.method),
            files=files,
        )

    # ------------------------------------------------------------------ argv building
    def _limit_prefix(self, limits: Limits, uid: int | None) -> list[str]:
        mem = limits.memory_mb * 1024 * 1024
        cpu = max(1, math.ceil(limits.cpu_s))
        if self._prlimit and (uid is None or self._setpriv):
            pre = [
                self._prlimit,
                f"--as={mem}",
                f"--cpu={cpu}:{cpu + 1}",
                f"--nproc={limits.max_processes}",
                f"--fsize={limits.max_file_bytes}",
                "--core=0",
                "--",
            ]
            if uid is not None and self._setpriv:
                pre += [self._setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
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
        return [self.python, "-I", "-S", "-c", RLIMIT_LAUNCHER, json.dumps(cfg), "--"]

    def _inner(self, command: list[str], limits: Limits, uid: int | None) -> list[str]:
        return self._limit_prefix(limits, uid) + list(command)

    def _bwrap_argv(
        self, files: dict[str, bytes | str], limits: Limits, inner: list[str], keep: list[int]
    ) -> list[str]:
        assert self._bwrap
        ns = (
            [
                "--unshare-pid",
                "--unshare-net",
                "--unshare-ipc",
                "--unshare-uts",
                "--unshare-cgroup-try",
                "--cap-add",
                "CAP_SETUID",
                "--cap-add",
                "CAP_SETGID",
            ]
            if self._root
            else ["--unshare-all"]
        )
        argv = [
            self._bwrap,
            *ns,
            "--die-with-parent",
            "--new-session",
            *self._binds,
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--size",
            str(limits.scratch_mb * 1024 * 1024),
            "--perms",
            "1777",
            "--tmpfs",
            WORKDIR,
        ]
        if self._seccomp:
            sfd = os.memfd_create("sandbox-seccomp")
            keep.append(sfd)
            os.write(sfd, self._seccomp)
            os.lseek(sfd, 0, os.SEEK_SET)
            argv += ["--seccomp", str(sfd)]
        made: set[str] = set()
        for name, content in files.items():
            parts = name.split("/")[:-1]
            for i in range(1, len(parts) + 1):
                d = "/".join(parts[:i])
                if d not in made:
                    made.add(d)
                    argv += ["--perms", "0755", "--dir", f"{WORKDIR}/{d}"]
            fd = os.memfd_create("sandbox-file")
            keep.append(fd)
            data = content.encode() if isinstance(content, str) else content
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.lseek(fd, 0, os.SEEK_SET)
            argv += ["--perms", "0444", "--ro-bind-data", str(fd), f"{WORKDIR}/{name}"]
        argv += [
            "--chdir",
            WORKDIR,
            "--clearenv",
            "--setenv",
            "PATH",
            _PATH,
            "--setenv",
            "HOME",
            WORKDIR,
            "--setenv",
            "TMPDIR",
            WORKDIR,
            "--setenv",
            "LANG",
            "C.UTF-8",
            "--",
            *inner,
        ]
        return argv

    def _ns_prefix(self, uid: int | None) -> list[str]:
        if self.method == "unshare":
            assert self._unshare
            user = [] if self._root else ["--user", "--map-root-user"]
            return [
                self._unshare,
                *user,
                "--pid",
                "--fork",
                "--kill-child",
                "--mount-proc",
                "--net",
                "--ipc",
                "--uts",
                "--",
            ]
        return []

    # ------------------------------------------------------------------ probing
    def _select(self, isolation: str) -> str:
        order = {
            "auto": ["bwrap", "unshare"],
            "bwrap": ["bwrap"],
            "unshare": ["unshare"],
            "none": ["none"],
        }[isolation]
        reasons: list[str] = []
        for method in order:
            why = self._probe(method)
            if why is None:
                return method
            reasons.append(f"{method}: {why}")
        if isolation == "auto" and self.allow_weak_isolation:
            return "none"
        raise SandboxUnavailable(
            "no namespace isolation works here (" + "; ".join(reasons) + "). Install bubblewrap "
            "and allow user namespaces, or accept rlimits only with --allow-weak-isolation "
            "(allow_weak_isolation=True)."
        )

    def _probe(self, method: str) -> str | None:
        tool = {"bwrap": self._bwrap, "unshare": self._unshare}.get(method, "none")
        if not tool:
            return "not installed"
        self.method = method
        ex = self.run(
            {"probe.txt": "ok"},
            [self.python, "-I", "-S", "-c", "print(open('probe.txt').read())"],
            Limits(wall_s=20, cpu_s=10),
        )
        if ex.stdout.strip() == b"ok" and ex.exit_code == 0:
            return None
        return (ex.infra_error or ex.stderr.decode(errors="replace").strip() or "failed")[:300]
