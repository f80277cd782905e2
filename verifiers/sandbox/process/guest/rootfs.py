"""Guest: the private read-only root of a namespaced run, and the drop to its unprivileged user.

Shared by the ``unshare`` run guest (``mountns``) and the workspace guest (``wsinit``); runs as
root of fresh namespaces, standard library only. ``build_root`` builds a tmpfs root at ``NEW``
from read-only binds (each source pinned by an ``O_PATH`` descriptor first, so no later mount
can hide it), device nodes, a fresh /proc and a size-limited /tmp, pivots into it and detaches
the host's tree; ``_drop`` turns the calling process into the command's unprivileged user
(setsid, rlimits, per-run uid or a nested user namespace, no_new_privs, seccomp).

It does NOT hide world-readable files inside the bound system dirs.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import platform
import resource
import stat
import struct
from typing import Any

from tasksieve.verifiers.sandbox.process.guest.ipclimits import limit_ipc
from tasksieve.verifiers.sandbox.process.guest.nsutil import (
    _RLIMITS,
    CLONE_NEWUSER,
    MS_BIND,
    MS_NODEV,
    MS_NOEXEC,
    MS_NOSUID,
    MS_PRIVATE,
    MS_RDONLY,
    MS_REC,
    MS_REMOUNT,
    PR_SET_NO_NEW_PRIVS,
    PR_SET_SECCOMP,
    SECCOMP_MODE_FILTER,
    _libc,
    _loopback_up,
    _mount,
    _ok,
    _write_inputs,
)

# Where the new root is built: a private tmpfs over this namespace's view of /tmp (the host's
# /tmp is untouched). It may be an ancestor of a bind source: sources are pinned first.
NEW = "/tmp"
_DEVICES = ("null", "zero", "full", "random", "urandom")
_SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}.get(platform.machine(), -1)
_SYS_MOUNT_SETATTR = 442  # the same number on every architecture
_MOUNT_ATTR_RDONLY, _AT_RECURSIVE, _MNT_DETACH = 1, 0x8000, 2


def _read_only(path: str) -> None:
    """Make the bind at ``path`` and every mount below it read-only."""
    attr = struct.pack("QQQQ", _MOUNT_ATTR_RDONLY, 0, 0, 0)
    rc = _libc.syscall(_SYS_MOUNT_SETATTR, -100, path.encode(), _AT_RECURSIVE, attr, len(attr))
    if rc != 0:  # kernels before 5.12: the top mount only
        flags = os.statvfs(path).f_flag & (MS_NOSUID | MS_NODEV | MS_NOEXEC)
        _mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | flags)


def _make(path: str, directory: bool) -> None:
    os.makedirs(os.path.dirname(path), 0o755, exist_ok=True)
    if directory:
        os.makedirs(path, 0o755, exist_ok=True)
    elif not os.path.exists(path):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o444))


def _pin(src: str) -> tuple[int, bool]:
    """An ``O_PATH`` descriptor of ``src`` and whether it is a directory.

    A bind made from ``/proc/self/fd/N`` reaches the pinned file even after a mount has
    covered its path, so the order of the mounts never decides what a run can see.
    """
    fd = os.open(src, os.O_PATH | os.O_CLOEXEC)
    return fd, stat.S_ISDIR(os.fstat(fd).st_mode)


def _bind_pinned(pin: tuple[int, bool], dst: str, recursive: bool = True) -> None:
    fd, directory = pin
    try:
        _make(dst, directory)
        _mount(f"/proc/self/fd/{fd}", dst, None, MS_BIND | (MS_REC if recursive else 0))
    finally:
        os.close(fd)


def bound_ipc(cfg: dict[str, Any], proc: str = "/proc") -> None:
    """Bound this process's IPC namespace to the run's memory (``limit_ipc``, through the
    ``/proc`` at ``proc``); where the kernel refuses the limits (or ``/proc/sys`` is read-only,
    as bubblewrap mounts it), give the run's processes the filter that refuses creating SysV
    objects and POSIX message queues instead."""
    if not limit_ipc(int(cfg.get("rlimits", {}).get("RLIMIT_AS", [0])[0]), proc):
        cfg["seccomp"] = cfg.get("seccomp_noipc") or cfg["seccomp"]


def build_root(cfg: dict[str, Any], body: bytes) -> None:
    """The new root at ``NEW``, entered with pivot_root; the host tree is detached."""
    _mount("none", "/", None, MS_REC | MS_PRIVATE)  # nothing propagates back to the host
    binds = [(_pin(src), NEW + dst) for src, dst in cfg["ro"]]
    devices = [(_pin(f"/dev/{dev}"), f"{NEW}/dev/{dev}") for dev in _DEVICES]
    _mount("tasksieve-root", NEW, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755")
    for pin, dst in binds:
        _bind_pinned(pin, dst)
        _read_only(dst)
    for target, path in cfg["links"]:
        _make(os.path.dirname(NEW + path), True)
        os.symlink(target, NEW + path)
    for pin, dst in devices:
        _bind_pinned(pin, dst, recursive=False)
    for i, name in enumerate(("stdin", "stdout", "stderr")):
        os.symlink(f"/proc/self/fd/{i}", f"{NEW}/dev/{name}")
    os.symlink("/proc/self/fd", f"{NEW}/dev/fd")
    size = int(cfg["scratch_bytes"]) + len(body)
    _make(f"{NEW}/tmp", True)
    _mount("tmpfs", f"{NEW}/tmp", "tmpfs", MS_NOSUID | MS_NODEV, f"size={size},mode=1777")
    _make(f"{NEW}/dev/shm", True)
    _mount(f"{NEW}/tmp", f"{NEW}/dev/shm", None, MS_BIND)
    _make(f"{NEW}/proc", True)
    _mount("proc", f"{NEW}/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    bound_ipc(cfg, f"{NEW}/proc")
    root = os.open(f"{NEW}/tmp", os.O_RDONLY | os.O_DIRECTORY)
    _write_inputs(root, cfg["files"], body)
    os.close(root)
    for name, _ in cfg["files"]:  # read-only even to an owner (a mount cannot be replaced)
        _mount(f"{NEW}/tmp/{name}", f"{NEW}/tmp/{name}", None, MS_BIND)
        _read_only(f"{NEW}/tmp/{name}")
    os.mkdir(f"{NEW}/.old")
    _ok(_libc.syscall(_SYS_PIVOT_ROOT, NEW.encode(), f"{NEW}/.old".encode()), "pivot_root")
    os.chdir("/")
    _ok(_libc.umount2(b"/.old", _MNT_DETACH), "detach the host tree")
    os.rmdir("/.old")
    _mount(None, "/", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    with contextlib.suppress(OSError):
        _loopback_up()


def hide_dirs(paths: list[str]) -> None:
    """Cover each existing directory of ``paths`` with an empty read-only tmpfs (a session's
    view of the host interpreter's own site-packages; see ``binds.base_site_dirs``)."""
    flags = MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY
    for path in paths:
        if os.path.isdir(path):
            _mount("tasksieve-hidden", path, "tmpfs", flags, "size=4k,mode=0555")


def _drop(cfg: dict[str, Any]) -> None:
    """Become the command's unprivileged user with its limits; caps go with the execve."""
    os.setsid()
    for name in _RLIMITS:
        soft, hard = cfg["rlimits"][name]
        resource.setrlimit(getattr(resource, name), (soft, hard))
    if cfg["uid"] is not None:
        uid = int(cfg["uid"])
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
    else:  # mapped root: a nested user namespace where we are uid 1000 (no capabilities)
        _ok(_libc.unshare(CLONE_NEWUSER), "unshare user")
        for name, text in (("setgroups", "deny"), ("uid_map", "1000 0 1"), ("gid_map", "1000 0 1")):
            with open(f"/proc/self/{name}", "w") as fh:
                fh.write(text)
        os.setresgid(1000, 1000, 1000)
        os.setresuid(1000, 1000, 1000)
    _ok(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    if cfg["seccomp"]:
        bpf = bytes.fromhex(cfg["seccomp"])
        buf = ctypes.create_string_buffer(bpf, len(bpf))
        prog = struct.pack("HxxxxxxP", len(bpf) // 8, ctypes.addressof(buf))
        _ok(_libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, prog, 0, 0), "seccomp")
