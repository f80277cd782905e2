"""Warm execution for the ``process`` sandbox: one long-lived bwrap entry that forks every run.

``ForkServer`` starts ``forkserver_main`` once inside bubblewrap (pid, net, ipc, uts and mount
namespaces; read-only system dirs and interpreter prefix; empty private /tmp; cleared
environment; no_new_privs) as root holding only CAP_SYS_ADMIN, CAP_SETUID, CAP_SETGID,
CAP_NET_ADMIN and CAP_KILL, with the Python harness compiled (common modules are imported
while it idles; scripts registered later are handed to it live, without a restart). Each run is a
request over a unix socket carrying its pipes and a memfd with files, argv, uid and limits; the
server forks it (~2 ms instead of ~20 ms for bwrap plus a fresh interpreter).

Isolation argument, per run: its own pid namespace (it sees only its processes; killing its
init, which the server does on the wall limit or when asked, kills everything it started, and
the server reports the end only after the namespace is empty); its own mount namespace with a
fresh size-limited tmpfs as /tmp (and /dev/shm) and a fresh /proc, so no run sees another's
scratch and input files are root-owned, read-only and undeletable (sticky dir); its own network
namespace (loopback only, private to the run: no outside network, no host loopback, no
abstract unix sockets or ports shared with other runs), uts and ipc namespaces (SysV IPC
bounded, ``guest/ipclimits``); its own
unprivileged uid (never reused while in use), so RLIMIT_NPROC counts only the run and it can
neither signal nor ptrace the root-owned server and inits; rlimits; the seccomp deny filter
(``seccomp``); fds closed except its three pipes. The server itself is unreachable:
outside the run's pid namespace, another uid, and its control socket is closed in every run.
Candidate and tests never share a process. As two ``spawn()`` runs they get two uids and two
namespace sets; as a pair run (``verifiers.sandbox.process.pair``, what ``PythonVerifier`` uses on
this server) one init per verification forks the candidate and then becomes the tests
process, so both share that verification's namespaces (never another's) but keep separate
uids, rlimits and seccomp: the candidate cannot signal, ptrace or read /proc of the tests
process (other uid, non-dumpable after setuid, /proc mounted ``hidepid=2``), cannot enter the
tests' 0700 directory, never holds the results pipe the host reads (its fds are exactly its
stdin/stdout to the tests and its stderr), and the tests' data is read from the payload only
after the candidate was forked, so it is not in the candidate's memory. A pair's verdict is
returned once the tests process reported ``done``, the kill was sent and the server reported
the end with the run's CPU time (the code family waits up to 2 s for that, then goes on
without it); its uids return to the pool only after the server reports the namespace empty.
Warm scripts that define ``warm_main`` run from the namespace the server executed them in (a
private copy-on-write copy per run, as with every other module).

It does NOT guard against: kernel bugs reachable through allowed syscalls (a run that
escapes its uid lands next to a root server with CAP_SYS_ADMIN in the host user namespace;
the per-run bwrap path has the same exposure through setpriv); memory or CPU summed over one
run's processes (rlimits are per process; as root, ``servercg`` bounds all runs of a server
together); state shared through the warm heap (a copy-on-write copy per run: nothing secret
is in it, but runs are not byte-identical to a fresh interpreter); timing side channels
between concurrent runs. It needs root (it drops to
per-run uids) or, unprivileged, a user namespace with a block of the caller's subordinate uids
(``userns.py``: the same per-run uids, mapped); without either the per-run bwrap path runs.

Reclamation: bwrap runs with ``--die-with-parent``, from a keeper thread that lives as long as
the server (``reap.Keeper``); ``close()`` returns once the server's pid namespace is empty.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from typing import Any

import tasksieve.verifiers.sandbox.process.servercg as servercg
from tasksieve.verifiers.sandbox.guest import bundle
from tasksieve.verifiers.sandbox.process.guest import forkserver as forkserver_main
from tasksieve.verifiers.sandbox.process.reap import Keeper, inits_of, wait_gone
from tasksieve.verifiers.sandbox.process.seccomp import noipc_filter
from tasksieve.verifiers.sandbox.process.uids import UIDS
from tasksieve.verifiers.sandbox.process.userns import server_prefix
from tasksieve.verifiers.sandbox.warm import warm_sources

SERVER_SOURCE = bundle(forkserver_main.__file__)
PREIMPORT = (
    "typing", "math", "re", "collections", "itertools", "functools", "heapq", "bisect",
    "string", "random", "hashlib", "fractions", "decimal", "datetime", "statistics", "copy",
    "operator", "dataclasses", "enum", "unittest",
)  # fmt: skip
# A job's environment, and the server's own, in this order: a job forked with the same names
# in the same order has its values set in place (``warmrun.hand_over``), without clearing and
# rebuilding the environment in every run.
JOB_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": "/tmp",
    "LANG": "C.UTF-8",
    "TMPDIR": "/tmp",
}


def clearenv_args() -> list[str]:
    """bubblewrap's arguments for a process started with exactly ``JOB_ENV``, in its order."""
    return ["--clearenv", *(a for k, v in JOB_ENV.items() for a in ("--setenv", k, v))]


_NO_PID = 2**31 - 1  # beyond pid_max: kill()/killpg() on it can never hit a host process
_CAPS = ("CAP_SYS_ADMIN", "CAP_SETUID", "CAP_SETGID", "CAP_NET_ADMIN", "CAP_KILL")


class ForkedProcess(subprocess.Popen[bytes]):
    """A ``Popen`` look-alike for a run forked by the server (no host pid of its own).

    ``returncode`` follows bwrap's convention (``128 + signal`` when the run died of a signal
    inside its namespace; ``-9`` when the server killed it). ``infra_error`` is set when the
    server could not set the run up. ``cpu_s``: the CPU time of the run's namespace, as the
    server reaped it (None until the end). ``oom_mark``: how to read the server cgroup's
    out-of-memory kill count, and its value at the start."""

    oom_mark: tuple[Callable[[], int | None], int | None] | None = None

    def __init__(self, args: list[str], stdin: int, stdout: int, stderr: int, status: socket.socket, uid: int) -> None:  # fmt: skip  # noqa: E501
        # Popen.__init__ is deliberately not called: there is no host child to create.
        self.args = args
        self.stdin = open(stdin, "wb", buffering=0)  # noqa: SIM115
        self.stdout = open(stdout, "rb", buffering=0)  # noqa: SIM115
        self.stderr = open(stderr, "rb", buffering=0)  # noqa: SIM115
        self.pid = _NO_PID
        self.returncode: Any = None
        self.infra_error: str | None = None
        self.cpu_s: float | None = None  # the server's measure, with the end of the run
        self.text_mode = self.universal_newlines = False
        self.encoding = self.errors = None
        self._child_created = False
        self._communication_started = False
        self._input = None
        self._sigint_wait_secs = 0.25
        self._waitpid_lock = threading.Lock()
        self._status = status
        self._buf = b""
        self._uid = uid

    def _read_status(self, timeout: float | None) -> None:
        with self._waitpid_lock:
            end = None if timeout is None else time.monotonic() + timeout
            while self.returncode is None:
                left = None if end is None else max(0.0, end - time.monotonic())
                ready, _, _ = select.select([self._status], [], [], left)
                if not ready:
                    return
                try:
                    chunk = self._status.recv(4096)
                except OSError:
                    chunk = b""
                self._buf += chunk
                while b"\n" in self._buf:
                    line, self._buf = self._buf.split(b"\n", 1)
                    with contextlib.suppress(ValueError, AttributeError):
                        msg = json.loads(line)
                        if "error" in msg:
                            self.infra_error = str(msg["error"])[:500]
                        if "rc" in msg:
                            self.cpu_s = cpu_of(msg)
                            self._finish(int(msg["rc"]))
                if not chunk and self.returncode is None:  # the server is gone
                    self.infra_error = self.infra_error or "fork server went away"
                    self._finish(-9)

    def _finish(self, rc: int) -> None:
        self.returncode = rc
        self._status.close()
        UIDS.give(self._uid)

    def poll(self) -> int | None:
        """The exit code if the run has ended (and its namespace is empty), else None."""
        if self.returncode is None:
            self._read_status(0.0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the run to end; raises ``subprocess.TimeoutExpired`` like ``Popen``."""
        if self.returncode is None:
            self._read_status(timeout)
        if self.returncode is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
        return self.returncode

    def _wait(self, timeout: float | None) -> int:
        return self.wait(timeout)

    def send_signal(self, sig: int) -> None:
        """Any signal kills the whole run (the server SIGKILLs its pid namespace)."""
        if self.returncode is None:
            with contextlib.suppress(OSError):
                self._status.send(b"k")

    def terminate(self) -> None:
        """Kill the run."""
        self.send_signal(9)

    def kill(self) -> None:
        """Kill the run."""
        self.send_signal(9)

    def __del__(self) -> None:
        if self.returncode is None:
            with contextlib.suppress(Exception):
                self._status.close()


def cpu_of(msg: dict[str, Any]) -> float | None:
    """The ``cpu_s`` of a server's end-of-run message, None when absent or not a number."""
    cpu = msg.get("cpu_s")
    if isinstance(cpu, (int, float)) and not isinstance(cpu, bool) and cpu >= 0:
        return float(cpu)
    return None


class ForkServer:
    """One warm server inside bwrap; restarted on demand if it dies or the host forked."""

    def __init__(
        self,
        bwrap: str,
        binds: list[str],
        python: str,
        seccomp: bytes | None,
        unshare: str | None = None,
        memory_bytes: int = 0,
        extra_warm: tuple[str, ...] = (),
    ) -> None:
        self._bwrap, self._binds, self._python, self._seccomp = bwrap, binds, python, seccomp
        self._extra_warm = extra_warm  # this server's own warm scripts (``Sandbox.dedicated``)
        self._memory = memory_bytes or servercg.default_memory_bytes()  # its cgroup's (servercg)
        self.cgroup = servercg.ServerCgroup(None, "none: not started")
        self._unshare = unshare  # unprivileged, bwrap starts under it in a user namespace
        self.source = SERVER_SOURCE  # the guest it starts (a benchmark may start an older one)
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._ctl: socket.socket | None = None
        self._owner = self._warm_count = 0
        self._inits: list[int] = []  # pidfd of the server's pid-namespace init
        self._keeper = Keeper()

    def _start(self) -> None:
        self._stop()
        prefix, why = server_prefix(os.geteuid() == 0, self._unshare)
        if prefix is None:
            raise OSError(f"fork server cannot start unprivileged: {why}")
        ctl, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        sources = warm_sources()
        cfg = {
            "ctl_fd": theirs.fileno(),
            "seccomp": self._seccomp.hex() if self._seccomp else "",
            "seccomp_noipc": (noipc_filter() or b"").hex() if self._seccomp else "",
            "warm_sources": [*sources, *self._extra_warm],
            "preimport": list(PREIMPORT),
        }
        cfd = os.memfd_create("forkserver-config")
        try:
            os.write(cfd, json.dumps(cfg).encode())
            caps = [a for c in servercg.server_caps(_CAPS) for a in ("--cap-add", c)]
            argv = [
                *prefix, self._bwrap, "--unshare-pid", "--unshare-net", "--unshare-ipc",
                "--unshare-uts", "--unshare-cgroup-try", *caps, "--new-session",
                "--die-with-parent", *self._binds,
                "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--chdir", "/tmp",
                *clearenv_args(),
                "--", self._python, "-I", "-S", "-c", self.source, str(cfd),
            ]  # fmt: skip
            self._proc = self._keeper.popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                pass_fds=(theirs.fileno(), cfd),
                start_new_session=True,
            )
        finally:
            os.close(cfd)
            theirs.close()
        self._ctl, self._owner = ctl, os.getpid()
        self._warm_count = len(sources)  # scripts registered since go as ``w`` requests
        ready, _, _ = select.select([ctl], [], [], 30.0)
        hello = ctl.recv(16) if ready else b""
        self._inits = inits_of(self._proc.pid)
        if hello != b"ready":
            err = b""
            if self._proc.poll() is not None and self._proc.stderr:
                err = self._proc.stderr.read()[-500:]
            self._stop()
            raise OSError(f"fork server did not start: {err.decode(errors='replace').strip()}")
        assert self._proc.stderr
        self._proc.stderr.close()  # the server never writes there once running
        self.cgroup = servercg.ServerCgroup.confine(self._proc.pid, self._memory)  # no run yet

    def _stop(self) -> None:
        """Close the control socket (the server kills every run and exits), wait for it.

        A server that does not exit in time is killed with its bwrap, whose init then dies
        of its parent-death signal; either way this returns once the server's pid
        namespace, and so every run nested in it, is empty (or after 30 s).
        """
        if self._ctl is not None:
            self._ctl.close()
            self._ctl = None
        if self._proc is not None:
            if self._owner == os.getpid():
                try:
                    self._proc.wait(timeout=5.0)
                except subprocess.TimeoutExpired:
                    self._proc.kill()
                    self._proc.wait()
                wait_gone(self._inits, 30.0)
                self.cgroup.remove()
            else:  # a forked copy of the host: the server belongs to the parent
                for fd in self._inits:
                    os.close(fd)
            self._inits = []
            if self._proc.stderr is not None:
                self._proc.stderr.close()
            self._proc = None

    def submit_fds(self, kind: bytes, fds: list[int]) -> None:
        """Send one request (``kind``: ``c``/``n`` run, ``p`` pair, ``m`` multi) with its fds,
        restarting the server once if it is gone."""
        with self._lock:
            for attempt in (0, 1):
                if self._ctl is None or self._owner != os.getpid() or self._dead():
                    self._start()
                assert self._ctl is not None
                try:
                    self._send_new_warm(self._ctl)
                    socket.send_fds(self._ctl, [kind], fds)
                    return
                except OSError:
                    self._stop()
                    if attempt:
                        raise

    def _send_new_warm(self, ctl: socket.socket) -> None:
        """Hand the server the scripts registered since it started (``w`` requests, served in
        order: the run sent next is forked with them warm, without restarting the server)."""
        sources = warm_sources()
        for src in sources[self._warm_count :]:
            fd = os.memfd_create("forkserver-warm")
            try:
                with open(fd, "wb", closefd=False) as fh:
                    fh.write(src.encode())
                socket.send_fds(ctl, [b"w"], [fd])
            finally:
                os.close(fd)
            self._warm_count += 1

    def _dead(self) -> bool:
        return self._proc is None or self._proc.poll() is not None

    @property
    def server_pid(self) -> int | None:
        """The host pid of the bwrap process holding the server (for tests and monitoring)."""
        return None if self._proc is None else self._proc.pid

    def close(self) -> None:
        """Stop the server; every run still going is killed with it."""
        with self._lock:
            self._stop()
            self._keeper.stop()


def start_run(
    server: ForkServer,
    job: dict[str, Any],
    files: dict[str, bytes | str],
    collect: bool,
) -> tuple[ForkedProcess, int | None]:
    """Submit one run; return its process and the collect pipe's read end (if any)."""
    blobs = [c.encode() if isinstance(c, str) else bytes(c) for c in files.values()]
    job = {**job, "files": [[n, len(b)] for n, b in zip(files, blobs, strict=True)]}
    status, their_status = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    theirs = {"status": their_status.detach()}
    mine: list[int] = []
    collect_r: int | None = None
    try:
        theirs["payload"] = os.memfd_create("sandbox-run")
        with open(theirs["payload"], "wb", closefd=False) as fh:
            fh.write(json.dumps(job).encode() + b"\n")
            for b in blobs:
                fh.write(b)
        for name in ("stdin", "stdout", "stderr"):
            r, w = os.pipe()
            theirs[name], mine_fd = (r, w) if name == "stdin" else (w, r)
            mine.append(mine_fd)
        if collect:
            collect_r, theirs["collect"] = os.pipe()
            mine.append(collect_r)
        else:
            theirs["collect"] = os.dup(theirs["payload"])  # a stand-in fd the server closes
        order = ("stdin", "stdout", "stderr", "status", "collect", "payload")
        server.submit_fds(b"c" if collect else b"n", [theirs[k] for k in order])
    except BaseException:
        for fd in mine:
            os.close(fd)
        status.close()
        UIDS.give(int(job["uid"]))
        raise
    finally:
        for fd in theirs.values():
            os.close(fd)
    proc = ForkedProcess(job["argv"], mine[0], mine[1], mine[2], status, int(job["uid"]))
    proc.oom_mark = (server.cgroup.oom_kills, server.cgroup.oom_kills())  # (runs.supervise)
    return proc, collect_r
