"""Guest: the workspace session agent as a docker container's main process.

Run as ``python3 -I -S -c <this source> CONFIG_JSON`` by ``docker run -i`` (root with only the
CHOWN, SETUID and SETGID capabilities, no network, a read-only root, the container's cgroup
limits; see ``verifiers.sandbox.docker.workspace``). Before it says hello it copies the
snapshot (/snapshot, root's alone) into the empty tmpfs at /workspace, gives every copied path
to the session's user (``uid``), then becomes that user for good: no supplementary groups, no
capabilities left, non-dumpable (so ``/proc/1/fd`` and ``/proc/1/mem`` stay closed to the
session's processes, which share its uid). From then on nothing in the container can read
/snapshot. Every command the agent starts gets a session of its own and the config's rlimits.
``changes`` lists the whole of /workspace (there is no upper layer to read here); the host
compares it with the snapshot. As PID 1 of the container the agent's exit stops the container,
and with it every process in it.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import shutil
import sys
from typing import Any

from tasksieve.verifiers.sandbox.guest.wsagent import serve
from tasksieve.verifiers.sandbox.guest.wsframe import frame_send

SNAPSHOT, WORKSPACE = "/snapshot", "/workspace"
_PR_SET_DUMPABLE = 4


def _limit(cfg: dict[str, Any]) -> None:
    os.setsid()
    for name, (soft, hard) in cfg["rlimits"].items():
        resource.setrlimit(getattr(resource, name), (soft, hard))


def populate(uid: int) -> None:
    """Copy the snapshot into the workspace, every path then owned by ``uid``."""
    shutil.copytree(SNAPSHOT, WORKSPACE, symlinks=True, dirs_exist_ok=True)
    for base, dirs, files in os.walk(WORKSPACE):
        for name in dirs + files:
            os.chown(os.path.join(base, name), uid, uid, follow_symlinks=False)
    os.chmod(WORKSPACE, 0o755)  # copytree gave it the snapshot's 0700; before the chown
    os.chown(WORKSPACE, uid, uid)


def become(uid: int) -> None:
    """Turn this process into ``uid`` for good, non-dumpable."""
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE)")
    if os.getuid() != uid or os.geteuid() != uid:
        raise OSError(f"still uid {os.geteuid()}, not {uid}")


def main() -> None:
    """Set the workspace up, then serve the session on stdin/stdout until it ends."""
    cfg = json.loads(sys.argv[1])
    uid = int(cfg["uid"])
    try:
        populate(uid)
        become(uid)
    except OSError as e:
        frame_send(1, {"ok": False, "error": f"workspace setup: {e}"})
        os._exit(125)
    serve(cfg, lambda: _limit(cfg), None, None, {"pid": os.getpid()})
    os._exit(0)


if __name__ == "__main__":
    main()
