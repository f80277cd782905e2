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
``lifeline`` (optional) is the read end of a pipe whose write end only the host holds: a
thread waits on it and exits (137) at EOF, so a run outlives no host, even one killed before
the parent-death signals were in place.

It does NOT hide world-readable files inside the bound system dirs, and it does not bound
CPU or memory summed over processes (see the sandbox module).
"""

from __future__ import annotations

import json
import os
import sys
import threading

from tasksieve.verifiers.sandbox.guest.pyrun import exec_command
from tasksieve.verifiers.sandbox.process.guest.nsutil import _keep_only, reap_then_exit
from tasksieve.verifiers.sandbox.process.guest.rootfs import _drop, build_root


def _watch(fd: int) -> None:
    """Exit (this init's namespace dies with it) once ``fd``, the host's lifeline, is at EOF."""

    def wait() -> None:
        try:
            while os.read(fd, 4096):
                pass
        except OSError:
            pass
        os._exit(137)

    threading.Thread(target=wait, daemon=True).start()


def main() -> None:
    """Set up, run the command as a child, reap, collect, exit with its status."""
    fd = int(sys.argv[1])
    data = os.pread(fd, os.fstat(fd).st_size, 0)
    os.close(fd)
    head, _, body = data.partition(b"\n")
    cfg = json.loads(head)
    collect = int(cfg["collect_fd"])
    life = int(cfg.get("lifeline", -1))
    try:
        _keep_only({fd for fd in (collect, life) if fd >= 0})
        build_root(cfg, body)
        del body, data
    except (OSError, ValueError) as e:
        os.write(2, f"sandbox-setup: {e}\n".encode())
        os._exit(125)
    pid = os.fork()
    if pid == 0:
        try:
            for fd in (collect, life):
                if fd >= 0:
                    os.close(fd)
            os.chdir("/tmp")
            _drop(cfg)
            exec_command(cfg["argv"], cfg["env"])
        except OSError as e:
            os.write(2, f"sandbox: cannot run {cfg['argv'][:1]!r}: {e}\n".encode())
            os._exit(127)
    if life >= 0:
        _watch(life)
    for i in (0, 1, 2):
        os.close(i)
    reap_then_exit(pid, collect, cfg)


if __name__ == "__main__":
    main()
