"""Guest helpers shared by the fork server and the unshare setup: mounts, fds, inputs, collect.

Runs inside the sandbox as root of its namespaces (standard library only; inlined by
``verifiers.sandbox.guest.bundle``). Nothing here is a boundary by itself: the callers build
the namespaces and drop privileges.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import json
import os
import select
import signal
import socket
import stat
import struct
from typing import Any, NoReturn

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWUSER = 0x20000000, 0x40000000, 0x10000000
MS_RDONLY, MS_REMOUNT = 1, 32
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_BIND, MS_REC, MS_PRIVATE = 2, 4, 8, 4096, 0x4000, 1 << 18
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER, PR_SET_PDEATHSIG = 38, 22, 2, 1
PR_SET_NAME = 15
_libc = ctypes.CDLL(None, use_errno=True)
_RLIMITS = ("RLIMIT_AS", "RLIMIT_CPU", "RLIMIT_NPROC", "RLIMIT_FSIZE", "RLIMIT_CORE")


def role(name: bytes) -> None:
    """Name this process (``comm``: what ``ps`` and ``perf`` show) by its role in a run."""
    _libc.prctl(PR_SET_NAME, name[:15], 0, 0, 0)  # best effort: never fails a run


def _die_with(server: int) -> None:
    """SIGKILL this process when the server dies (and exit now if it already has)."""
    _ok(_libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "pdeathsig")
    if select.select([server], [], [], 0)[0]:  # the server's pidfd: readable once it exited
        os._exit(1)


def oom_adjust(value: int) -> None:
    """Set this process's ``oom_score_adj`` (a job raises its own above the server's, -1000
    or 0: under memory pressure the kernel kills runs before the server or an entry's init)."""
    fd = os.open("/proc/self/oom_score_adj", os.O_WRONLY)
    try:
        os.write(fd, str(value).encode())
    finally:
        os.close(fd)


def _ok(rc: int, what: str) -> None:
    if rc != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"{what}: {os.strerror(e)}")


def _mount(
    src: str | None, dst: str, fstype: str | None, flags: int, data: str | None = None
) -> None:
    _ok(
        _libc.mount(
            src.encode() if src else None,
            dst.encode(),
            fstype.encode() if fstype else None,
            ctypes.c_ulong(flags),
            data.encode() if data else None,
        ),
        f"mount {dst}",
    )


def _loopback_up() -> None:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        req = struct.pack("16sh", b"lo", 0)
        flags = struct.unpack("16sh", fcntl.ioctl(s, 0x8913, req))[1]  # SIOCGIFFLAGS
        fcntl.ioctl(s, 0x8914, struct.pack("16sh", b"lo", flags | 1))  # SIOCSIFFLAGS, IFF_UP
    finally:
        s.close()


def _keep_only(keep: set[int]) -> None:
    """Close every fd above 2 not in ``keep`` (close_range under the hood)."""
    lo = 3
    for fd in sorted(f for f in keep if f >= 3):
        if fd > lo:
            os.closerange(lo, fd)
        lo = fd + 1
    os.closerange(lo, 1 << 20)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _write_inputs(root: int, files: list[list[object]], body: bytes) -> None:
    """Write ``files`` ([name, size] in ``body`` order) under dir fd ``root``, 0444, no links."""
    pos = 0
    for name, n in files:
        assert isinstance(name, str) and isinstance(n, int)
        parts = name.split("/")
        if not name or name.startswith("/") or any(p in ("", ".", "..") for p in parts):
            raise ValueError(f"bad file name {name!r}")
        d = root
        for p in parts[:-1]:
            with contextlib.suppress(FileExistsError):
                os.mkdir(p, 0o755, dir_fd=d)
            nd = os.open(p, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=d)
            if d != root:
                os.close(d)
            d = nd
        f = os.open(parts[-1], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444, dir_fd=d)
        _write_all(f, body[pos : pos + n])
        os.close(f)
        if d != root:
            os.close(d)
        pos += n


def _collect(names: list[str], cap: int, fd: int) -> None:
    """Stream the named files to ``fd`` as frames (see ``launchers.COLLECTOR``); no symlinks."""
    for name in names:
        data: bytes | None = None
        fds: list[int] = []
        try:
            cur = os.open("/tmp", os.O_RDONLY | os.O_DIRECTORY)
            fds.append(cur)
            parts = name.split("/")
            for p in parts[:-1]:
                cur = os.open(p, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=cur)
                fds.append(cur)
            cur = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=cur)
            fds.append(cur)
            if stat.S_ISREG(os.fstat(cur).st_mode):
                data = os.read(cur, cap + 1)
        except OSError:
            data = None
        finally:
            for f in fds:
                os.close(f)
        size = -1 if data is None else (-2 if len(data) > cap else len(data))
        frame = (json.dumps({"name": name, "size": size}) + "\n").encode()
        _write_all(fd, frame + (data if data is not None and size >= 0 else b""))


def reap_then_exit(pid: int, collect: int, spec: dict[str, Any]) -> NoReturn:
    """As a namespace's init: reap orphans until ``pid`` exits, then kill and reap what is
    left (so the CPU time of every process is in this init's, which its reaper reads: the
    kernel discards, uncounted, the members an exiting init takes with it), stream the files
    ``spec`` names (``collect``, ``cap``) to the ``collect`` fd if it is open, exit with its
    status."""
    while True:
        try:
            got, st = os.waitpid(-1, 0)
        except ChildProcessError:
            os._exit(1)
        except InterruptedError:
            continue
        if got == pid:
            break
    while os.getpid() == 1:  # only an init's -1 is its own namespace and nothing else
        with contextlib.suppress(OSError):
            os.kill(-1, signal.SIGKILL)
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            break
        except InterruptedError:
            continue
    if collect >= 0:
        with contextlib.suppress(OSError):
            _collect(list(spec["collect"]), int(spec["cap"]), collect)
    os._exit(os.WEXITSTATUS(st) if os.WIFEXITED(st) else 128 + os.WTERMSIG(st))
