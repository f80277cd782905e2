"""The ``unshare`` path of the process sandbox: util-linux namespaces plus a private root.

``unshare_argv`` starts ``setpriv --pdeathsig KILL unshare --mount --pid --net --ipc --uts
--fork --kill-child [--user --map-root-user] python -c MOUNTNS FD``: the guest
(``guest/mountns.py``) pivots into a tmpfs root holding only the read-only system binds, a
fresh /proc and a size-limited scratch tmpfs as cwd and /tmp, then runs the command as an
unprivileged uid with rlimits, no_new_privs and the seccomp filter. The parent-death signals
chain the run to the host thread that started it: the host dies, so does ``unshare``, so does
the namespace's init, so does every process in it. Each signal is set by the child after its
fork, so a host killed in that moment leaves the chain broken (the run, reparented, goes on);
the guest therefore also holds the read end of this host process's lifeline pipe
(``process.lifeline``), whose only write end the host holds, and exits, taking the namespace
with it, when it reads EOF: the host is gone, however it went.

It does NOT guard against what bubblewrap does not either (see the sandbox module); it
needs ``setpriv`` next to ``unshare`` (both util-linux) and, unprivileged, user namespaces
that may mount a fresh /proc.
"""

from __future__ import annotations

import json
import os
from typing import Any

from tasksieve.verifiers.sandbox.base import Limits
from tasksieve.verifiers.sandbox.process.launchers import MOUNTNS
from tasksieve.verifiers.sandbox.process.lifeline import lifeline
from tasksieve.verifiers.sandbox.process.runs import warm_job
from tasksieve.verifiers.sandbox.process.seccomp import noipc_filter


def unshare_argv(
    tools: tuple[str, str, str],
    plan: list[tuple[str, str, str]],
    job: tuple[dict[str, bytes | str], list[str], Limits],
    uid: int | None,
    seccomp: bytes | None,
    collect: tuple[tuple[str, ...], int],
    keep: list[int],
) -> list[str]:
    """The argv of one run; its config memfd is appended to ``keep`` (pass it, then close it).

    ``tools`` are the setpriv, unshare and python paths; ``job`` the files, command and
    limits; ``collect`` the names to collect and the pipe's write end (-1: none).
    """
    setpriv, unshare, python = tools
    files, command, limits = job
    blobs = [c.encode() if isinstance(c, str) else bytes(c) for c in files.values()]
    cfg: dict[str, Any] = {
        **warm_job(command, limits),
        "ro": [[s, d] for kind, s, d in plan if kind == "ro"],
        "links": [[s, d] for kind, s, d in plan if kind == "link"],
        "files": [[n, len(b)] for n, b in zip(files, blobs, strict=True)],
        "scratch_bytes": limits.scratch_mb * 1024 * 1024,
        "uid": uid,
        "collect": list(collect[0]),
        "cap": limits.max_file_bytes,
        "collect_fd": collect[1],
        "seccomp": seccomp.hex() if seccomp else "",
        "seccomp_noipc": (noipc_filter() or b"").hex() if seccomp else "",
        "lifeline": lifeline(),
    }
    keep.append(cfg["lifeline"])
    fd = os.memfd_create("sandbox-unshare")
    keep.append(fd)
    with open(fd, "wb", closefd=False) as fh:
        fh.write(json.dumps(cfg).encode() + b"\n")
        for b in blobs:
            fh.write(b)
    user = [] if uid is not None else ["--user", "--map-root-user"]
    return [
        setpriv, "--pdeathsig", "KILL", "--",
        unshare, *user, "--mount", "--pid", "--net", "--ipc", "--uts", "--fork", "--kill-child",
        "--", python, "-I", "-S", "-c", MOUNTNS, str(fd),
    ]  # fmt: skip
