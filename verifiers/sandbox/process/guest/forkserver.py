"""The fork server: a warm interpreter inside one bubblewrap sandbox that forks one job per request.

Run by ``..forkserver`` as ``python -I -S -c <this source> CONFIG_FD`` inside bwrap
(read-only system, private /tmp, no network, pid namespace, as root with only CAP_SYS_ADMIN,
CAP_SETUID, CAP_SETGID, CAP_NET_ADMIN and CAP_KILL: a multi-sample run's init kills one
sample's uid). Standard library only. For each request on the
control socket (a one-byte message carrying fds: stdin, stdout, stderr, status socket, collect
pipe or -1, payload memfd) it forks:

- ``init`` (pid 1 of a new pid namespace; new mount, net, ipc and uts namespaces): mounts a
  size-limited tmpfs on /tmp (also bound on /dev/shm) and a fresh /proc, brings loopback up,
  writes the input files root-owned and read-only into the sticky /tmp, forks the job, reaps
  every orphan, once the job exited kills and reaps what is left (so its CPU time is counted),
  reads the collect files back without following links, and exits with the job's status
  (``128 + signal`` when it was killed);
- ``job`` (pid 2): new session, rlimits, no supplementary groups, its own unprivileged uid,
  no_new_privs, the seccomp filter; then the shared warm-run runtime
  (``tasksieve.verifiers.sandbox.guest.warmrun``, inlined here) gives it its environment and
  either ``execve``s the command or, for ``[python, -I, -S, script|-c code, ...]``, runs the
  script in this already warm interpreter (a fresh ``__main__``, or a registered script's
  ``warm_main()``; exit status and tracebacks as in a fresh interpreter).

A ``p`` request (fds: results pipe, stderr pipe, status socket, payload memfd) is a pair
run: its ``init`` forks the candidate job and then itself becomes the tests job (see
``_pair_init`` and ``tasksieve.verifiers.sandbox.process.pair``). An ``m`` request is K
samples of one task with one tests process (``guest.multi``). A ``w`` request (one memfd
holding a trusted script the host registered after the server started) compiles and executes
it in the server as ``warm_up`` did at boot, so jobs forked after it run it warm.

The server answers ``ready`` once the registered scripts are compiled; the common modules
the host names (``preimport``) are imported afterwards, one at a time while no request waits
(and one per ``_BUSY_ROUNDS`` rounds of a server that is never idle), so a short-lived sandbox
does not wait for modules its runs may never use (a job forked before they are all loaded
imports what it needs itself, as a fresh interpreter would).

The server watches each ``init`` with a pidfd and its status socket: a byte or EOF from the
host kills ``init`` (and with it the whole pid namespace); when ``init`` is reaped the
namespace is empty and the server writes ``{"rc": code, "cpu_s": seconds}`` and closes the
socket. ``cpu_s`` is ``wait4``'s user plus system time of ``init`` (its own and that of every
process reaped in its tree) plus, for a run killed on request, what its live processes had
used when the kill was sent (``cputime``: the kernel drops the time of the members an exiting
``init`` takes with it). EOF on the control socket (the host went away) makes the server
SIGKILL every run's ``init`` (after the kill requests of the same poll round) and exit. Each
``init`` also has a parent-death signal, so a server that dies any other way takes its runs
with it. See ``tasksieve.verifiers.sandbox.process.forkserver`` for the isolation argument.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import gc
import json
import os
import select
import signal
import socket
import struct
import sys
from typing import Any

from tasksieve.verifiers.sandbox.guest.warmrun import (
    WarmScripts,
    hand_over,
    job_failed,
    run_warm,
    set_rlimits,
    warm_up,
)
from tasksieve.verifiers.sandbox.process.guest.cputime import live_cpu
from tasksieve.verifiers.sandbox.process.guest.ipclimits import limit_ipc
from tasksieve.verifiers.sandbox.process.guest.multi import multi_init
from tasksieve.verifiers.sandbox.process.guest.nsutil import (
    _RLIMITS,
    CLONE_NEWIPC,
    CLONE_NEWNET,
    CLONE_NEWNS,
    CLONE_NEWPID,
    CLONE_NEWUTS,
    MS_BIND,
    MS_NODEV,
    MS_NOEXEC,
    MS_NOSUID,
    MS_PRIVATE,
    MS_REC,
    PR_SET_NO_NEW_PRIVS,
    PR_SET_SECCOMP,
    SECCOMP_MODE_FILTER,
    _die_with,
    _keep_only,
    _libc,
    _loopback_up,
    _mount,
    _ok,
    _write_all,
    _write_inputs,
    oom_adjust,
    reap_then_exit,
    role,
)

_NOIPC: list[bool] = []  # set in an entry's init when the kernel refused its IPC limits


# --------------------------------------------------------------------------- init (pid 1)
def _read_payload(fd: int) -> tuple[dict[str, Any], bytes]:
    size = os.fstat(fd).st_size
    data = os.pread(fd, size, 0)
    head, _, body = data.partition(b"\n")
    return json.loads(head), body


def _setup_scratch(job: dict[str, Any], body: bytes, hidepid: bool = False) -> int:
    """New mount/net/ipc/uts namespaces, a fresh /tmp holding the files; returns /tmp's fd."""
    size = int(job["scratch_bytes"]) + len(body)
    _ok(_libc.unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS), "unshare")
    _mount("none", "/", None, MS_REC | MS_PRIVATE)
    _mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, f"size={size},mode=1777")
    if os.path.isdir("/dev/shm"):
        _mount("/tmp", "/dev/shm", None, MS_BIND)
    proc_opts = "hidepid=2" if hidepid else None
    _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, proc_opts)
    if not limit_ipc(int(job.get("rlimits", {}).get("RLIMIT_AS", [0])[0])):  # (ipclimits)
        _NOIPC.append(True)  # this entry's jobs get the filter refusing SysV IPC
    _loopback_up()
    root = os.open("/tmp", os.O_RDONLY | os.O_DIRECTORY)
    _write_inputs(root, job["files"], body)
    return root


def _init(fds: list[int], cfg: dict[str, Any]) -> dict[str, Any]:
    """Pid 1 of the job's namespace; returns only in the forked job process."""
    stdin, stdout, stderr, status, collect, payload = fds
    try:
        _keep_only({f for f in fds if f >= 0})
        job, body = _read_payload(payload)
        os.close(payload)
        if int(job["uid"]) < 1000:
            raise ValueError("refusing a privileged uid")
        os.close(_setup_scratch(job, body))
        del body
    except BaseException as e:
        os.write(status, (json.dumps({"error": f"job setup failed: {e}"}) + "\n").encode())
        os._exit(1)
    pid = os.fork()
    if pid == 0:
        for f in (status, collect):
            if f >= 0:
                os.close(f)
        return _become_job(job, [stdin, stdout, stderr], cfg)
    for f in (stdin, stdout, stderr, status):
        os.close(f)
    reap_then_exit(pid, collect, job)


# --------------------------------------------------------------------------- pair (pid 1)
def _pair_init(fds: list[int], cfg: dict[str, Any], server: int) -> dict[str, Any]:
    """Pid 1 of a pair's namespace: fork the candidate, then become the tests process.

    The payload is ``<Q header length>``, a JSON header (``cand`` and ``tests`` jobs, each
    with its files' names and sizes, and ``scratch_bytes``), the candidate's file bytes, then
    the tests' file bytes. The tests' bytes are read only after the candidate was forked, so
    they are never in its memory, and land in a directory only the tests' uid can enter.
    Returns (in each of the two processes) the job to run warm. ``server`` (the server's
    pidfd) lets the tests process re-arm its parent-death signal after its uid changed.
    """
    results, stderr, status, payload = fds
    try:
        _keep_only({*fds, server})
        (hlen,) = struct.unpack("<Q", os.pread(payload, 8, 0))
        head = json.loads(os.pread(payload, hlen, 8))
        cand, tests = head["cand"], head["tests"]
        if min(int(cand["uid"]), int(tests["uid"])) < 1000 or cand["uid"] == tests["uid"]:
            raise ValueError("refusing a privileged or shared uid")
        cand_len = sum(n for _, n in cand["files"])
        body = os.pread(payload, cand_len, 8 + hlen)
        root = _setup_scratch({"scratch_bytes": head["scratch_bytes"], **cand}, body, True)
        del body
        tuid = int(tests["uid"])
        os.mkdir(".t", 0o700, dir_fd=root)
        tdir = os.open(".t", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=root)
        os.chown(tdir, tuid, tuid)
        os.close(root)
        to_cand, from_cand = os.pipe(), os.pipe()
    except BaseException as e:
        os.write(status, (json.dumps({"error": f"pair setup failed: {e}"}) + "\n").encode())
        os._exit(1)
    pid = os.fork()
    if pid == 0:
        for f in (results, status, payload, tdir, to_cand[1], from_cand[0], server):
            os.close(f)
        return _become_job(cand, [to_cand[0], from_cand[1], stderr], cfg)
    os.close(to_cand[0])
    os.close(from_cand[1])
    try:
        pos = 8 + hlen + cand_len
        for name, n in tests["files"]:
            if "/" in name or name in ("", ".", ".."):
                raise ValueError(f"bad tests file name {name!r}")
            f = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400, dir_fd=tdir)
            _write_all(f, os.pread(payload, n, pos))
            os.fchown(f, tuid, tuid)
            os.close(f)
            pos += n
        os.close(tdir)
        os.close(payload)
        os.close(status)
    except BaseException as e:
        os.write(status, (json.dumps({"error": f"pair setup failed: {e}"}) + "\n").encode())
        os._exit(1)
    tests = {**tests, "argv": [*tests["argv"], str(pid)], "cwd": "/tmp/.t", "oom_score_adj": 500}
    return _become_job(tests, [from_cand[0], to_cand[1], stderr, results], cfg, server)


# --------------------------------------------------------------------------- the job
def _become_job(
    job: dict[str, Any], fds: list[int], cfg: dict[str, Any], server: int = -1
) -> dict[str, Any]:
    """Drop to the job's uid and limits; exec the command or run it warm here (and exit).

    ``fds`` become the job's fds 0, 1, 2, ... in order; every other fd is closed. With
    ``server`` (a pidfd; the pair's tests process, pid 1 of its namespace) the parent-death
    signal, which a uid change clears, is set again once the uid is dropped.
    """
    try:
        os.setsid()
        high = [fcntl.fcntl(f, fcntl.F_DUPFD_CLOEXEC, 64) for f in [*fds, server] if f >= 0]
        for i, f in enumerate(high[: len(fds)]):
            os.dup2(f, i)
        _keep_only({*range(len(fds)), *high[len(fds) :]})
        os.chdir(job.get("cwd", "/tmp"))
        set_rlimits(job["rlimits"], _RLIMITS)
        oom_adjust(int(job.get("oom_score_adj", 1000)))  # a run dies before the server
        uid = int(job["uid"])
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
        if server >= 0:
            _die_with(high[-1])
            os.close(high[-1])
        _ok(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
        if prog := cfg.get("_noipc" if _NOIPC else "_prog"):
            _ok(_libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, prog, 0, 0), "seccomp")
        job = hand_over(job)
    except BaseException as e:
        job_failed(e, list(job["argv"]))
    if cfg.get("_run"):  # not returning: unwound frames would free objects on shared pages
        cfg["_run"](job)
    return job  # no ``_run``: the caller runs it


# --------------------------------------------------------------------------- the server
def _add_warm(fd: int, warm: WarmScripts) -> None:
    """A ``w`` request: compile and execute one more trusted script, as at boot."""
    try:
        src = os.pread(fd, os.fstat(fd).st_size, 0).decode()
        if src not in warm:
            warm.update(warm_up([src], []))  # later jobs are forked with it compiled
    except Exception:  # a job running a script left unwarmed runs it cold
        pass
    finally:
        os.close(fd)


def serve(ctl: socket.socket, cfg: dict[str, Any], warm: WarmScripts) -> dict[str, Any]:
    """Fork jobs until the host closes ``ctl``; returns only inside a warm job process."""
    own_pidns = os.open("/proc/self/ns/pid", os.O_RDONLY)
    me = os.pidfd_open(os.getpid())
    poller = select.poll()
    poller.register(ctl.fileno(), select.POLLIN)
    pidfds: dict[int, tuple[int, int]] = {}  # pidfd -> (pid, status socket)
    socks: dict[int, int] = {}  # status socket -> pidfd
    killed: dict[int, float | None] = {}  # pidfd -> CPU seconds its live processes had at the kill
    later = list(cfg.get("preimport", []))  # imported after ready: see _preimport
    busy = 0
    ctl.send(b"ready")
    while True:
        ready = {fd for fd, _ in poller.poll(0 if later else None)}
        if later and (not ready or busy >= _BUSY_ROUNDS):
            _preimport(later.pop(0), last=not later)
            busy = 0
            if not ready:
                continue
        busy += 1
        # Kills first, then ends, then at most one request: a request opens fds (numbers of
        # ones closed above may be reused), so it comes last; EOF on ``ctl`` comes after
        # the kills of the same round were sent.
        for fd in sorted(ready & socks.keys()):  # the host asks for a kill (a byte or EOF)
            pidfd = socks.pop(fd)
            killed[pidfd] = live_cpu(pidfds[pidfd][0])  # what the teardown will not count
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            poller.unregister(fd)
        for fd in sorted(ready & pidfds.keys()):  # init exited: its pid namespace is gone
            pid, sock = pidfds.pop(fd)
            _, st, usage = os.wait4(pid, 0)  # init with every process it reaped: the run's CPU
            rc = os.WEXITSTATUS(st) if os.WIFEXITED(st) else -os.WTERMSIG(st)
            extra = killed.pop(fd, 0.0)  # None: the kill's reading failed, so no measure
            cpu = None if extra is None else round(usage.ru_utime + usage.ru_stime + extra, 6)
            with contextlib.suppress(OSError):
                os.write(sock, (json.dumps({"rc": rc, "cpu_s": cpu}) + "\n").encode())
            if socks.pop(sock, None) is not None:
                poller.unregister(sock)
            poller.unregister(fd)
            os.close(sock)
            os.close(fd)
        if ctl.fileno() not in ready:
            continue
        try:
            msg, fds, _flags, _addr = socket.recv_fds(ctl, 16, _MAX_FDS)
        except OSError:
            msg, fds = b"", []
        if not msg:  # the host went away: no run outlives it
            for pidfd in pidfds:
                with contextlib.suppress(OSError):
                    signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            os._exit(0)
        if msg == b"w" and len(fds) == 1:
            _add_warm(fds[0], warm)
            continue
        want, st_i = (4, 2) if msg == b"p" else (6, 3)
        if msg == b"m":  # results, tests' stderr, status, payload, one stderr per sample
            want, st_i = max(5, len(fds)), 2
        if len(fds) != want:
            for f in fds:
                os.close(f)
            continue
        if msg == b"n":  # no collect pipe: the host sent a stand-in fd
            os.close(fds[4])
            fds[4] = -1
        _ok(_libc.unshare(CLONE_NEWPID), "unshare pid")
        try:
            pid = os.fork()
        except OSError:
            pid = -1
        if pid == 0:
            ctl.detach()
            _die_with(me)
            if msg == b"m":
                return multi_init(fds, cfg, me, _setup_scratch, _become_job)
            return _pair_init(fds, cfg, me) if msg == b"p" else _init(fds, cfg)
        _ok(_libc.setns(own_pidns, CLONE_NEWPID), "setns pid")
        sock = fds[st_i]
        for f in fds:
            if f >= 0 and f != sock:
                os.close(f)
        if pid < 0:
            os.write(sock, b'{"error": "fork failed"}\n{"rc": -9}\n')
            os.close(sock)
            continue
        pidfd = os.pidfd_open(pid)
        pidfds[pidfd] = (pid, sock)
        socks[sock] = pidfd
        poller.register(pidfd, select.POLLIN)
        poller.register(sock, select.POLLIN)


_MAX_FDS = 64  # an ``m`` request: 4 + one per sample (the host sends at most 32 samples)
_BUSY_ROUNDS = 8  # a server that is never idle still imports one module per this many rounds


def _preimport(name: str, last: bool) -> None:
    """Import one common module into the server, so jobs forked later find it loaded.

    Called when no request waits (or after ``_BUSY_ROUNDS`` busy rounds), so a request is
    rarely kept waiting behind an import.
    """
    with contextlib.suppress(ImportError):
        __import__(name)
    if last:
        gc.collect()
    gc.freeze()  # as warm_up does: forked jobs' collections skip the server's objects


def boot() -> tuple[dict[str, Any], WarmScripts]:
    """Read the config, warm the interpreter, serve; returns only in a warm job process."""
    cfd = int(sys.argv[1])
    cfg = json.loads(os.pread(cfd, os.fstat(cfd).st_size, 0))
    os.close(cfd)
    role(b"ts-forkserver")
    for key, name in (("seccomp", "_prog"), ("seccomp_noipc", "_noipc")):
        if cfg.get(key):  # ``_noipc``: for entries whose IPC limits the kernel refused
            bpf = bytes.fromhex(cfg[key])
            cfg["_buf" + name] = buf = ctypes.create_string_buffer(bpf, len(bpf))
            cfg[name] = struct.pack("HxxxxxxP", len(bpf) // 8, ctypes.addressof(buf))
    with contextlib.suppress(OSError):  # with CAP_SYS_RESOURCE only (``servercg``)
        oom_adjust(-1000)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    warm = warm_up(cfg.get("warm_sources", []), [])  # the preimports come after ready
    cfg["_run"] = lambda job: run_warm(job, warm)  # a forked job runs where it was forked
    ctl = socket.socket(fileno=int(cfg["ctl_fd"]))
    job = serve(ctl, cfg, warm)
    return job, warm


if __name__ == "__main__":
    _job, _warm = boot()
    del boot, serve
    run_warm(_job, _warm)
