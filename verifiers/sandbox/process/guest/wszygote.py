"""Guest: the workspace zygote, a pre-imported guest that forks one workspace session per request.

Run as root on the host (``python -I -S -c <this bundle> zygote CTL_FD HOST_PID``): it has imported
and compiled the whole session guest (``wsinit`` and the agent), freezes its heap for the
garbage collector, says ``ready`` on its control socket (a unix SEQPACKET socket whose other end
only the host holds) and serves requests, one at a time:

- ``o`` with three fds (the session's config memfd, the read end of its request pipe, the
  write end of its reply pipe): ``unshare(CLONE_NEWPID)`` and a fork, so the child is pid 1 of
  a fresh pid namespace; the zygote answers ``ok PID`` with a pidfd of the child (the host
  kills the session with it and waits on it), or ``error WHY``.
- EOF (the host closed the socket or died): every session is SIGKILLed and the zygote exits.

The child (``_zygote_child``) gets a parent-death signal (the zygote dies: so does the
session, and with its pid 1 every process in it), leaves the zygote's session, takes the pipes
as fds 0 and 1, closes every other fd (the control socket and the other sessions' pidfds
among them), moves itself into the session's cgroup (written by the host into the config),
unshares mount, network, ipc, uts (and cgroup) namespaces and then runs exactly the cold
path's ``unshare`` set-up (``wsinit.run_session``): private read-only root, the layer's tmpfs
and overlay, /snapshot detached, non-dumpable agent, per-session uid, rlimits, no_new_privs and
seccomp for every process the session starts. The zygote itself stays outside every session's
pid namespace, under another uid, and no session holds any of its fds.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import select
import signal
import socket
import sys

from tasksieve.verifiers.sandbox.guest.wsframe import frame_send
from tasksieve.verifiers.sandbox.process.guest.nsutil import (
    CLONE_NEWPID,
    PR_SET_PDEATHSIG,
    _keep_only,
    _libc,
    _ok,
)
from tasksieve.verifiers.sandbox.process.guest.wsinit import run_session

_CLONE_NEWCGROUP = 0x02000000
_ZYGOTE_NS = 0x00020000 | 0x40000000 | 0x08000000 | 0x04000000  # mount, net, ipc, uts


def _zygote_die_with(pidfd: int) -> None:
    """SIGKILL this process when the process behind ``pidfd`` dies (exit now if it has)."""
    _ok(_libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "pdeathsig")
    if select.select([pidfd], [], [], 0)[0]:
        os._exit(1)


def _zygote_child(fds: list[int], zygote: int) -> None:
    """Pid 1 of a new session: enter its namespaces and run the cold path's set-up."""
    try:
        cfg_fd, req, rep = fds
        _zygote_die_with(zygote)
        os.setsid()
        os.dup2(req, 0)
        os.dup2(rep, 1)
        cfg = json.loads(os.pread(cfg_fd, os.fstat(cfg_fd).st_size, 0))
        _keep_only(set())  # the control socket, other sessions' pidfds, the config
        for procs in cfg.get("cgroup_procs", []):  # before this process starts anything
            with open(procs, "w") as fh:
                fh.write("0")
        _ok(_libc.unshare(_ZYGOTE_NS), "unshare")
        _libc.unshare(_CLONE_NEWCGROUP)  # as bubblewrap's --unshare-cgroup-try
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    except BaseException as e:
        with contextlib.suppress(OSError):
            frame_send(1, {"ok": False, "error": f"workspace setup (zygote): {e}"})
        os._exit(125)
    run_session(cfg)


def _zygote_fork(fds: list[int], own_pidns: int, me: int) -> int:
    """Fork ``fds``' session as pid 1 of a new pid namespace; its pid in ours (or -1)."""
    _ok(_libc.unshare(CLONE_NEWPID), "unshare pid")
    try:
        pid = os.fork()
    except OSError:
        pid = -1
    if pid == 0:
        try:
            _zygote_child(fds, me)
        finally:
            os._exit(125)
    _ok(_libc.setns(own_pidns, CLONE_NEWPID), "setns pid")
    return pid


def _zygote_serve(ctl: socket.socket) -> None:
    """Fork sessions until the host closes ``ctl`` (see module doc)."""
    own_pidns = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
    me = os.pidfd_open(os.getpid())
    poller = select.poll()
    poller.register(ctl.fileno(), select.POLLIN)
    kids: dict[int, int] = {}  # pidfd -> pid
    devnull = os.open("/dev/null", os.O_WRONLY)
    os.dup2(devnull, 2)  # the host reads our stderr only until ready; sessions inherit this
    os.close(devnull)
    ctl.send(b"ready")
    while True:
        ready = {fd for fd, _ in poller.poll()}
        for fd in sorted(ready & kids.keys()):  # a session's pid 1 ended: reap it
            with contextlib.suppress(ChildProcessError):
                os.waitpid(kids.pop(fd), 0)
            poller.unregister(fd)
            os.close(fd)
        if ctl.fileno() not in ready:
            continue
        try:
            msg, fds, _flags, _addr = socket.recv_fds(ctl, 16, 4)
        except OSError:
            msg, fds = b"", []
        if not msg:  # the host went away: no session outlives it
            for pidfd in kids:
                with contextlib.suppress(OSError):
                    signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            os._exit(0)
        if msg != b"o" or len(fds) != 3:
            for f in fds:
                os.close(f)
            ctl.send(b"error bad request")
            continue
        try:
            pid, why = _zygote_fork(fds, own_pidns, me), "fork failed"
        except OSError as e:  # no new pid namespace now (a limit): this open fails, not us
            pid, why = -1, str(e)
        for f in fds:
            os.close(f)
        if pid < 0:
            ctl.send(f"error {why}".encode()[:200])
            continue
        pidfd = os.pidfd_open(pid)
        kids[pidfd] = pid
        poller.register(pidfd, select.POLLIN)
        socket.send_fds(ctl, [f"ok {pid}".encode()], [pidfd])


def zygote_main() -> None:
    """Die with the host, freeze the imported heap, serve (see module doc)."""
    ctl = socket.socket(fileno=int(sys.argv[2]))
    _ok(_libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "pdeathsig")
    if os.getppid() != int(sys.argv[3]):  # the host died before the signal was armed
        os._exit(1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    _keep_only({ctl.fileno()})
    gc.collect()
    gc.freeze()  # sessions' collections skip the zygote's objects: their pages stay shared
    _zygote_serve(ctl)


if __name__ == "__main__":
    zygote_main()
