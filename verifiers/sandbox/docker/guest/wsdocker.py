"""Guest: the workspace session agent as a docker container's main process.

Run as ``python3 -I -S -c <this source> CONFIG_JSON`` by ``docker run -i`` (user 65534, no
network, the container's cgroup limits), with the workspace baked into the container's image
at /workspace and the snapshot at /snapshot (see ``verifiers.sandbox.docker.workspace``).
Every command the agent starts gets a session of its own and the config's rlimits. ``diff``
compares the two trees (docker's own layers are out of this process's reach). As PID 1 of the
container the agent's exit stops the container, and with it every process in it.
"""

from __future__ import annotations

import json
import os
import resource
import sys
from typing import Any

from tasksieve.verifiers.sandbox.guest.wsagent import serve


def _limit(cfg: dict[str, Any]) -> None:
    os.setsid()
    for name, (soft, hard) in cfg["rlimits"].items():
        resource.setrlimit(getattr(resource, name), (soft, hard))


def main() -> None:
    """Serve the session on stdin/stdout until it ends."""
    cfg = json.loads(sys.argv[1])
    serve(cfg, lambda: _limit(cfg), None, None, {"pid": os.getpid()})
    os._exit(0)


if __name__ == "__main__":
    main()
