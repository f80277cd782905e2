"""The zygote of a docker sandbox container: forks each run's job from the warm interpreter.

Runs inside the container (standard library only), inlined into ``server`` by
``tasksieve.verifiers.sandbox.guest.bundle``. The server forks the zygote once, after the warm
scripts ran (``warmrun.warm_up``) and before it reads any request, so the zygote's heap never
holds a request, a file or a run's output. Per run the server sends it one message carrying
four fds: the job's stdin, stdout and stderr pipes and a private socket with the request
(JSON: ``argv``, ``env``, ``cwd``, ``rlimits``). The zygote forks the job, tells the server
its pid (``P`` + 4-byte big-endian pid), waits for it and sends its wait status (``S`` +
4 bytes; ``127 << 8`` when the fork failed). The job reads the request, starts a new session,
takes the pipes as fds 0-2 and closes every other fd, sets ``oom_score_adj`` 1000, chdirs
into its run dir, applies the rlimits in the guest, turns dumpable again and hands over to
the shared warm-run runtime (exec of the command, or a warm run).

It does NOT guard against: a run signalling or stopping the zygote (same uid; the server
reports a dead or stopped zygote and the host recycles the container), nor a request that
names another run dir (the server checks it before the zygote sees it).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import socket
import struct
from typing import Any

from tasksieve.verifiers.sandbox.guest.warmrun import hand_over, job_failed, set_rlimits

CHUNK = 65536
_PR_SET_DUMPABLE = 4
_RLIMITS = ("RLIMIT_AS", "RLIMIT_CPU", "RLIMIT_FSIZE", "RLIMIT_CORE")


def dumpable(on: bool) -> None:
    """Turn this process dumpable or not (best effort): ptrace and ``/proc/N/fd`` follow it."""
    with contextlib.suppress(Exception):
        ctypes.CDLL(None).prctl(_PR_SET_DUMPABLE, int(on), 0, 0, 0)


def zygote(ctl: socket.socket) -> dict[str, Any]:
    """Fork one job per message on ``ctl``; returns only inside a job that runs warm."""
    null = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
    while True:
        try:
            _msg, fds, _flags, _addr = socket.recv_fds(ctl, 1, 4)
        except InterruptedError:
            continue
        except OSError:
            os._exit(0)
        if not _msg:
            os._exit(0)
        if len(fds) != 4:
            for f in fds:
                os.close(f)
            continue
        try:
            pid = os.fork()
        except OSError:
            pid = -1
        if pid == 0:
            ctl.detach()
            return _become_job(fds)
        for f in fds:
            os.close(f)
        ctl.sendall(b"P" + struct.pack(">i", pid))
        st = (127 << 8) if pid < 0 else os.waitpid(pid, 0)[1]
        ctl.sendall(b"S" + struct.pack(">i", st))


def _become_job(fds: list[int]) -> dict[str, Any]:
    """Turn this fork into the run's job; exec the command or return the request to run warm."""
    stdin, stdout, stderr, reqfd = fds
    req: dict[str, Any] = {"argv": ["?"]}
    try:
        os.setsid()
        raw = bytearray()
        while chunk := os.read(reqfd, CHUNK):
            raw += chunk
        req = json.loads(raw)
        for i, f in enumerate((stdin, stdout, stderr)):
            os.dup2(f, i)
        os.closerange(3, 1 << 16)
        with contextlib.suppress(OSError), open("/proc/self/oom_score_adj", "w") as fh:
            fh.write("1000")
        os.chdir(req["cwd"])
        set_rlimits(req["rlimits"], _RLIMITS)
        dumpable(True)
        return hand_over(req)
    except BaseException as e:
        job_failed(e, [str(a) for a in req.get("argv", ["?"])])
