"""Guest: build a private read-only root for one run inside ``unshare``, then run the command.

Run by the ``unshare`` path of the process sandbox as pid 1 of new mount, pid, net, ipc and
uts namespaces (and, unprivileged, a user namespace mapping the caller to root):
``python -I -S -c <this source> CONFIG_FD``. Standard library only. CONFIG_FD is a memfd
holding one JSON line (``ro``: [source, target] pairs bound read-only; ``links``: [target,
path] symlinks; ``files``: [name, size]; ``scratch_bytes``, ``uid`` (None: unprivileged),
``rlimits``, ``env``, ``argv``, ``collect``, ``cap``, ``collect_fd``, ``seccomp`` hex) then
the input files' bytes. Steps: every bind source (and device node) is pinned by an ``O_PATH``
descriptor while the host's tree is still in view, so that no mount made later can hide it (a
checkout or virtualenv under the host's /tmp, say); a tmpfs at ``NEW`` becomes the new root
holding only the read-only binds, made from those descriptors, a few device nodes, a fresh
/proc and a size-limited tmpfs /tmp (also /dev/shm) with the input files bound read-only;
``pivot_root`` into it and detach the host's tree, so host files (the host's /tmp included)
are out of reach; loopback up; the root is remounted
read-only. The command then runs as a child with its own session, rlimits, an unprivileged
uid (root: the per-run uid; unprivileged: uid 1000 of a nested user namespace, so no
capabilities survive its execve), no_new_privs and the seccomp filter. This process reaps
orphans, streams the collect files to ``collect_fd`` and exits with the command's status
(``128 + signal`` if it was killed). Setup failures print ``sandbox-setup: ...`` and exit 125.

It does NOT hide world-readable files inside the bound system dirs, and it does not bound
CPU or memory summed over processes (see the sandbox module).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import platform
import resource
import stat
import struct
import sys
from typing import Any

from tasksieve.verifiers.sandbox.guest.pyrun import exec_command
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
    _keep_only,
    _libc,
    _loopback_up,
    _mount,
    _ok,
    _write_inputs,
    reap_then_exit,
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


def main() -> None:
    """Set up, run the command as a child, reap, collect, exit with its status."""
    fd = int(sys.argv[1])
    data = os.pread(fd, os.fstat(fd).st_size, 0)
    os.close(fd)
    head, _, body = data.partition(b"\n")
    cfg = json.loads(head)
    collect = int(cfg["collect_fd"])
    try:
        _keep_only({collect} if collect >= 0 else set())
        build_root(cfg, body)
        del body, data
    except (OSError, ValueError) as e:
        os.write(2, f"sandbox-setup: {e}\n".encode())
        os._exit(125)
    pid = os.fork()
    if pid == 0:
        try:
            if collect >= 0:
                os.close(collect)
            os.chdir("/tmp")
            _drop(cfg)
            exec_command(cfg["argv"], cfg["env"])
        except OSError as e:
            os.write(2, f"sandbox: cannot run {cfg['argv'][:1]!r}: {e}\n".encode())
            os._exit(127)
    for i in (0, 1, 2):
        os.close(i)
    reap_then_exit(pid, collect, cfg)


if __name__ == "__main__":
    main()
