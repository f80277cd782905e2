"""bubblewrap's command line for one cold (not fork-server) run of the ``process`` sandbox.

Root: new pid, net, ipc, uts (and cgroup) namespaces, with only the capabilities to drop to
the run's uid; unprivileged: every namespace bwrap can make, a user namespace included.
Input files are memfds bound read-only into a size-limited tmpfs that is the run's cwd.

SysV IPC: the fork server and the ``unshare`` guest bound each run's IPC namespace
(``guest/ipclimits.py``); here no process of the run keeps the privilege to, and bwrap mounts
``/proc/sys`` read-only, so the run's seccomp filter refuses creating SysV objects and POSIX
message queues instead (``seccomp.IPC_CREATE_X86_64``): one program using them gets EPERM
on this path where it gets a bounded budget on the others.
"""

from __future__ import annotations

import os

from tasksieve.verifiers.sandbox.base import Limits
from tasksieve.verifiers.sandbox.process.forkserver import clearenv_args
from tasksieve.verifiers.sandbox.process.runs import WORKDIR
from tasksieve.verifiers.sandbox.process.seccomp import noipc_filter


def bwrap_argv(
    tool: tuple[str, bool, list[str], bytes | None],
    job: tuple[dict[str, bytes | str], Limits, list[str]],
    keep: list[int],
    info_fd: int,
) -> list[str]:
    """bwrap's argv for one run; the memfds it makes are appended to ``keep``.

    ``tool`` is bwrap's path, whether we are root, the read-only binds and the seccomp
    filter; ``job`` the files, limits and the inner command. ``info_fd`` is where bwrap
    reports the pid of the namespace's init (see ``reap.init_from_info``).
    """
    bwrap, root, binds, seccomp = tool
    files, limits, inner = job
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
        if root
        else ["--unshare-all"]
    )
    argv = [
        bwrap,
        "--info-fd",
        str(info_fd),
        *ns,
        "--die-with-parent",
        "--new-session",
        *binds,
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
    if seccomp:  # a namespace whose SysV limits nobody here can set: no SysV objects at all
        seccomp = noipc_filter() or seccomp
        sfd = os.memfd_create("sandbox-seccomp")
        keep.append(sfd)
        os.write(sfd, seccomp)
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
        *clearenv_args(),  # as a warm job's
        "--",
        *inner,
    ]
    return argv
