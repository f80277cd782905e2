"""Guest: set up one workspace session inside its namespaces, then run the session agent.

Run as pid 1 of new mount, pid, net, ipc and uts namespaces (bubblewrap with ``--as-pid-1``,
or ``unshare``; unprivileged, also a user namespace): ``python -I -S -c <this source> FD``.
FD is a memfd holding one JSON line (see ``verifiers.sandbox.process.workspace``). With
``unshare`` the private read-only root is built here first (``rootfs.build_root``; bubblewrap
builds its own). Then, in this mount namespace only:

- the host interpreter's own site-packages (``cfg["hide"]``) are covered by empty read-only
  tmpfs mounts, so the session's ``python3`` sees what the tests see (the standard library and
  the task's environment), not packages installed into the interpreter the virtualenv is built on;

- root mode: the snapshot's view at /snapshot is replaced by an idmapped, read-only clone that
  shows files owned by uid 0 as owned by the session's uid (which has no other privilege), so
  its shell may change them in the workspace while the snapshot on disk stays untouched;
- a tmpfs of ``disk_bytes`` (the session's disk quota) is mounted at /workspace holding the
  overlay's upper and work directories and the session's /tmp (bound at /tmp, so /tmp counts
  against the same quota);
- an overlay (lower: /snapshot) is mounted over it at /workspace, which hides the layer's
  tmpfs from the session; the agent keeps a descriptor of the upper directory for ``changes``;
- then every mount at /snapshot (and the snapshot bind the ``unshare`` root had at /workspace,
  before the tmpfs covered it) is detached: the overlay holds private clones of its layers, so
  no path in the namespace leads to the lower layer any more and a file the session deletes
  from its view (a hidden test) cannot be read back by any path; the agent itself is made
  non-dumpable, so ``/proc/1/fd``, ``/proc/1/root`` and ``/proc/1/mem`` are closed to the
  session's processes even where they share its uid.

Nothing of this is visible in the host's mount table, and all of it goes when the namespace's
last process does. Setup failures are reported in the hello frame (``ok: false``) and exit 125.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import platform
import signal
import struct
import sys
from typing import Any

from tasksieve.verifiers.sandbox.guest.wsagent import serve
from tasksieve.verifiers.sandbox.guest.wsframe import frame_send
from tasksieve.verifiers.sandbox.process.guest.nsutil import (
    CLONE_NEWUSER,
    MS_BIND,
    MS_NODEV,
    MS_NOSUID,
    MS_RDONLY,
    MS_REMOUNT,
    _keep_only,
    _libc,
    _mount,
    _ok,
)
from tasksieve.verifiers.sandbox.process.guest.rootfs import (
    _MNT_DETACH,
    _drop,
    bound_ipc,
    build_root,
    hide_dirs,
)

_SYS_OPEN_TREE, _SYS_MOVE_MOUNT, _SYS_SETATTR = 428, 429, 442  # the same on every arch
_SYS_CLONE = {"x86_64": 56, "aarch64": 220}[platform.machine()]  # flags first on both
_OPEN_TREE_CLONE, _AT_EMPTY_PATH, _MOVE_EMPTY = 1, 0x1000, 4
_ATTR_RDONLY, _ATTR_IDMAP = 0x1, 0x00100000
_EINVAL, _PR_SET_DUMPABLE = 22, 4


def detach_all(path: str) -> None:
    """Detach every mount stacked at ``path`` (none there: nothing to do)."""
    while _libc.umount2(path.encode(), _MNT_DETACH) == 0:
        pass
    err = ctypes.get_errno()
    if err != _EINVAL:
        raise OSError(err, f"detach {path}: {os.strerror(err)}")


def _userns_fd(uid: int) -> int:
    """A user namespace mapping 0 to ``uid`` (for an idmapped mount), held by a descriptor.

    A raw ``clone(CLONE_NEWUSER)`` child is in its namespace from birth, so the maps are
    written at once, without a handshake with the child (which only waits to be killed)."""
    syscall = _libc.syscall
    syscall.restype = ctypes.c_long
    zero = ctypes.c_long(0)
    flags = ctypes.c_ulong(CLONE_NEWUSER | signal.SIGCHLD)
    pid = syscall(_SYS_CLONE, flags, zero, zero, zero, zero)
    if pid == 0:
        while True:  # the child: no Python beyond this loop, SIGKILL ends it
            _libc.pause()
    if pid < 0:
        _ok(-1, "clone a user namespace")
    try:
        for name in ("uid_map", "gid_map"):
            with open(f"/proc/{pid}/{name}", "w") as fh:
                fh.write(f"0 {uid} 1\n")
        return os.open(f"/proc/{pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


def idmap_snapshot(uid: int) -> None:
    """Replace /snapshot by a read-only clone whose uid 0 shows as ``uid`` (see module doc)."""
    syscall = _libc.syscall
    syscall.restype = ctypes.c_long
    ns = _userns_fd(uid)
    tree = syscall(_SYS_OPEN_TREE, -100, b"/snapshot", _OPEN_TREE_CLONE | os.O_CLOEXEC)
    if tree < 0:
        _ok(-1, "open_tree /snapshot")
    try:
        attr = struct.pack("QQQQ", _ATTR_IDMAP | _ATTR_RDONLY, 0, 0, ns)
        _ok(syscall(_SYS_SETATTR, tree, b"", _AT_EMPTY_PATH, attr, len(attr)), "idmap /snapshot")
        _ok(syscall(_SYS_MOVE_MOUNT, tree, b"", -100, b"/snapshot", _MOVE_EMPTY), "move_mount")
    finally:
        os.close(tree)
        os.close(ns)


def make_layer(cfg: dict[str, Any]) -> int:
    """The quota tmpfs, /tmp and the overlay at /workspace; a descriptor of the upper dir."""
    owner = cfg["owner"]
    if owner is not None:
        idmap_snapshot(owner)
    ids = "" if owner is None else f",uid={owner},gid={owner}"
    opts = f"size={cfg['disk_bytes']},mode=0755{ids}"
    detach_all("/workspace")  # the unshare root's mount point: a bind of the snapshot
    _mount("workspace", "/workspace", "tmpfs", MS_NOSUID | MS_NODEV, opts)
    for name in ("upper", "work", "tmp"):
        os.mkdir(f"/workspace/{name}", 0o755)
        if owner is not None:
            os.chown(f"/workspace/{name}", owner, owner)
    os.chmod("/workspace/tmp", 0o1777)
    upper = os.open("/workspace/upper", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    _mount("/workspace/tmp", "/tmp", None, MS_BIND)
    data = "lowerdir=/snapshot,upperdir=/workspace/upper,workdir=/workspace/work"
    if owner is None and cfg["uid"] is None:
        data += ",userxattr"  # unprivileged: trusted.* xattrs are out of reach
    _mount("overlay", "/workspace", "overlay", MS_NOSUID | MS_NODEV, data)
    detach_all("/snapshot")  # the overlay keeps its own clone of the lower layer
    with contextlib.suppress(OSError):  # the unshare root is read-only already
        os.rmdir("/snapshot")
    if cfg["mode"] == "bwrap":  # its root tmpfs: the session's user may own it (unprivileged)
        keep = os.statvfs("/").f_flag & (MS_NOSUID | MS_NODEV)
        _mount(None, "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY | keep)
    return upper


def _oom_score(value: int) -> None:
    try:
        with open("/proc/self/oom_score_adj", "w") as fh:
            fh.write(str(value))
    except OSError:
        pass  # unprivileged: only raising it is allowed


def _session_drop(cfg: dict[str, Any]) -> None:
    """A session process: back to the default OOM score, then the run's drop (``_drop``)."""
    _oom_score(0)
    _drop(cfg)


def run_session(cfg: dict[str, Any]) -> None:
    """Build the workspace in this process's namespaces, serve the session, exit.

    Shared by the cold start (``main``) and a session forked by the zygote (``wszygote``);
    fds 0 and 1 are the session's request and reply pipes. Never returns."""
    try:
        _keep_only(set())
        if cfg["mode"] == "unshare":
            build_root(cfg, b"")  # bounds the IPC namespace (or refuses SysV IPC) itself
        else:
            # bubblewrap's session. Left at the namespace's defaults, one command of an
            # unprivileged session (no cgroup counts it) held 1 GB of SysV segments.
            bound_ipc(cfg)
        hide_dirs(cfg.get("hide", []))
        upper = make_layer(cfg)
        _ok(_libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0), "non-dumpable")
    except (OSError, ValueError) as e:
        frame_send(1, {"ok": False, "error": f"workspace setup: {e}"})
        os._exit(125)
    devnull = os.open("/dev/null", os.O_WRONLY)
    os.dup2(devnull, 2)
    os.close(devnull)
    owner = None if cfg["owner"] is None else (cfg["owner"], cfg["owner"])
    _oom_score(-1000)  # the session's OOM kills hit its commands, never the agent
    serve(cfg, lambda: _session_drop(cfg), upper, owner, {"pid": os.getpid()})
    os._exit(0)


def main() -> None:
    """Read the config, build the workspace, serve the session, exit (ending the namespace)."""
    fd = int(sys.argv[1])
    cfg = json.loads(os.pread(fd, os.fstat(fd).st_size, 0))
    os.close(fd)
    run_session(cfg)


# The zygote's bundle (``wszygote``) inlines this module: there argv[1] is ``zygote``.
if __name__ == "__main__" and sys.argv[1] != "zygote":
    main()
