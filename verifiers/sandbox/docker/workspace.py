"""Workspaces of the ``docker`` sandbox: docker's own layers, one container per session.

The snapshot becomes an image once (``snapshot_image``: ``FROM`` the sandbox image, the tree
copied to /snapshot, root-owned, and to /workspace, owned by the sandbox user; tagged by a
hash of the tree's paths, modes and contents, so a later session of an equal tree reuses
it). A session is one ``docker run -i`` of that image whose main process is the guest agent
(``guest/wsdocker.py``) speaking frames over the attached stdin/stdout
(``verifiers.sandbox.wsclient``): one stream for the whole session, no ``docker exec``.
The container runs as uid 65534 with no network, no capabilities, no_new_privs, and the
session's memory (swap included), process and CPU limits on its cgroup; /tmp is a tmpfs of
``disk_mb``. An environment tree is bound read-only at /env. ``close`` removes the container.

It does NOT bound the disk use of /workspace (the container's writable layer; docker's
``--storage-opt size`` works only on some storage drivers) beyond RLIMIT_FSIZE per file, and
building the image copies the tree once per snapshot (seconds; later sessions start from it).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tempfile
import threading
import uuid
from pathlib import Path

from tasksieve.verifiers.sandbox.docker.image import image_name
from tasksieve.verifiers.sandbox.guest import bundle
from tasksieve.verifiers.sandbox.process.workspace import session_env
from tasksieve.verifiers.sandbox.workspace import (
    ENV_MOUNT,
    WorkspaceError,
    WorkspaceSpec,
)
from tasksieve.verifiers.sandbox.wsclient import GuestSession

WSDOCKER = bundle(str(Path(__file__).parent / "guest" / "wsdocker.py"))
_BUILD_LOCK = threading.Lock()


_HASHES: dict[str, str] = {}  # a tree's stat listing -> its content hash (this process)


def tree_hash(root: str) -> str:
    """A hash of every path, mode and file content under ``root`` (the image cache key), so
    an equal tree made again elsewhere reuses the image; each file is read once per process
    while its paths, sizes and mtimes stay the same."""
    listing = hashlib.sha256()
    files: list[tuple[str, str]] = []
    for base, dirs, names in os.walk(root):
        dirs.sort()
        for name in sorted(names):
            path = os.path.join(base, name)
            st = os.lstat(path)
            rel = os.path.relpath(path, root)
            listing.update(f"{path}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_mode}\n".encode())
            files.append((rel, f"{st.st_mode:o}"))
    key = listing.hexdigest()
    if key not in _HASHES:
        content = hashlib.sha256()
        for rel, mode in files:
            path = os.path.join(root, rel)
            data = os.readlink(path).encode() if os.path.islink(path) else Path(path).read_bytes()
            content.update(f"{rel}\0{mode}\0{len(data)}\n".encode() + data)
        _HASHES[key] = content.hexdigest()[:20]
    return _HASHES[key]


def snapshot_image(snapshot: str, base: str | None = None) -> str:
    """The image holding ``snapshot`` at /snapshot and /workspace, built once per tree."""
    if not os.path.isdir(snapshot):
        raise WorkspaceError(f"snapshot {snapshot!r} is not a directory")
    tag = f"tasksieve-workspace:{tree_hash(snapshot)}"
    with _BUILD_LOCK:
        if subprocess.run(["docker", "image", "inspect", tag], capture_output=True).returncode == 0:
            return tag
        dockerfile = (
            f"FROM {image_name(base)}\nUSER 0:0\nCOPY . /snapshot\n"
            "COPY --chown=65534:65534 . /workspace\nUSER 65534:65534\nWORKDIR /workspace\n"
        )
        with tempfile.NamedTemporaryFile("w", suffix=".Dockerfile") as fh:
            fh.write(dockerfile)
            fh.flush()
            r = subprocess.run(
                ["docker", "build", "-q", "-t", tag, "-f", fh.name, snapshot],
                capture_output=True,
                text=True,
                timeout=900,
            )
    if r.returncode != 0:
        raise WorkspaceError(f"cannot build the image of {snapshot}: {r.stderr.strip()[-500:]}")
    return tag


def open_docker_workspace(spec: WorkspaceSpec, base: str | None = None) -> GuestSession:
    """Start one session's container; the caller owns (and closes) it."""
    lim = spec.limits
    image = snapshot_image(os.path.realpath(spec.snapshot), base)
    mem, disk = lim.memory_mb * 1024 * 1024, lim.disk_mb << 20
    cpu = max(1, int(lim.cpu_s))
    env = session_env(spec)
    cfg = {
        "env": env,
        "rlimits": {
            "RLIMIT_CPU": [cpu, cpu + 1],
            "RLIMIT_FSIZE": [disk, disk],
            "RLIMIT_CORE": [0, 0],
        },
        "idle_s": lim.idle_s,
        "lifetime_s": lim.lifetime_s,
        "command_wall_s": lim.command_wall_s,
        "max_output_bytes": lim.max_output_bytes,
    }
    name = f"tasksieve-ws-{uuid.uuid4().hex[:12]}"
    volumes = [] if spec.env is None else ["-v", f"{os.path.realpath(spec.env)}:{ENV_MOUNT}:ro"]
    argv = [
        "docker", "run", "-i", "--rm", "--name", name, "--network", "none",
        "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
        "--memory", str(mem), "--memory-swap", str(mem), "--pids-limit", str(lim.max_processes),
        "--cpus", "1", "--tmpfs", f"/tmp:size={disk},mode=1777", *volumes,
        "--user", "65534:65534", "-w", "/workspace", "--log-driver", "none", image,
        "python3", "-I", "-S", "-c", WSDOCKER, json.dumps(cfg),
    ]  # fmt: skip
    popen = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )

    def kill() -> None:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True, timeout=60)
        try:
            popen.wait(timeout=30)
        except subprocess.TimeoutExpired:
            popen.kill()
            popen.wait()
        for f in (popen.stdin, popen.stdout):
            if f is not None:
                f.close()

    assert popen.stdin is not None and popen.stdout is not None
    req, rep = os.dup(popen.stdin.fileno()), os.dup(popen.stdout.fileno())
    return GuestSession(spec, req, rep, kill, "docker", popen.pid)
