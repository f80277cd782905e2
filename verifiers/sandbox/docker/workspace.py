"""Workspaces of the ``docker`` sandbox: one container per session, its workspace a tmpfs.

The snapshot becomes an image once (``snapshot_image``: ``FROM`` the sandbox image, the tree
copied to /snapshot, which is root's alone (mode 0700); tagged by a hash of the tree's paths,
modes and contents, so a later session of an equal tree reuses it). A session is one ``docker
run -i`` of that image whose main process is the guest agent (``guest/wsdocker.py``) speaking
frames over the attached stdin/stdout (``verifiers.sandbox.wsclient``): one stream for the
whole session, no ``docker exec``. The agent starts as root with only the CHOWN, SETUID and
SETGID capabilities, copies /snapshot into /workspace, a tmpfs sized to the tree plus
``disk_mb`` (the session's disk quota: a write past it fails with ENOSPC), gives it to uid
65534 and becomes uid 65534 for good (no capabilities, non-dumpable) before it answers. From
then on nothing in the container can open /snapshot, so a file deleted from /workspace (an
agent's hidden test) is gone from the session. The root filesystem is read-only, so the
container's own writable layer (on the host's disk) takes no write; /tmp is a tmpfs of
``disk_mb``. The container has no network, no_new_privs, and the session's memory (swap and
the tmpfs pages included), process and CPU limits on its cgroup. An environment tree is bound
read-only at /env. ``diff`` is computed on the host (``verifiers.sandbox.wshostdiff``) from the
guest's listing of /workspace and the snapshot in the store. ``close`` removes the container.

It does NOT start a session without copying the tree (the copy is in memory, once per
session: milliseconds for a small repository, more for a large one), and /dev/shm (docker's
default 64 MB tmpfs) is a second small writable place beside the two quotas.
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
    WORKSPACE_ROOT,
    WorkspaceError,
    WorkspaceSpec,
)
from tasksieve.verifiers.sandbox.wsclient import GuestSession
from tasksieve.verifiers.sandbox.wshostdiff import SnapshotSession

WSDOCKER = bundle(str(Path(__file__).parent / "guest" / "wsdocker.py"))
_BUILD_LOCK = threading.Lock()


_HASHES: dict[str, str] = {}  # a tree's stat listing -> its content hash (this process)
_PAGE = 4096
LAYOUT = "s2"  # the image layout (bumped when it changes, so no older image is reused)


def _walk(root: str) -> tuple[str, list[tuple[str, str]], int]:
    """(the stat listing's hash, [(path, mode)], bytes the tree takes in a tmpfs)."""
    listing = hashlib.sha256()
    files: list[tuple[str, str]] = []
    footprint = 0
    for base, dirs, names in os.walk(root):
        dirs.sort()
        for name in sorted(names + [d for d in dirs if os.path.islink(os.path.join(base, d))]):
            path = os.path.join(base, name)
            st = os.lstat(path)
            rel = os.path.relpath(path, root)
            listing.update(f"{path}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_mode}\n".encode())
            files.append((rel, f"{st.st_mode:o}"))
            footprint += max(_PAGE, -(-st.st_size // _PAGE) * _PAGE)
    return listing.hexdigest(), files, footprint


def tree_footprint(root: str) -> int:
    """Bytes the tree under ``root`` takes once copied into a tmpfs (whole pages)."""
    return _walk(root)[2]


def tree_hash(root: str) -> str:
    """A hash of every path, mode and file content under ``root`` (the image cache key), so
    an equal tree made again elsewhere reuses the image; each file is read once per process
    while its paths, sizes and mtimes stay the same."""
    key, files, _ = _walk(root)
    if key not in _HASHES:
        content = hashlib.sha256()
        for rel, mode in files:
            path = os.path.join(root, rel)
            data = os.readlink(path).encode() if os.path.islink(path) else Path(path).read_bytes()
            content.update(f"{rel}\0{mode}\0{len(data)}\n".encode() + data)
        _HASHES[key] = content.hexdigest()[:20]
    return _HASHES[key]


def snapshot_image(snapshot: str, base: str | None = None) -> str:
    """The image holding ``snapshot`` at /snapshot (root's alone), built once per tree."""
    if not os.path.isdir(snapshot):
        raise WorkspaceError(f"snapshot {snapshot!r} is not a directory")
    tag = f"tasksieve-workspace:{LAYOUT}-{tree_hash(snapshot)}"
    with _BUILD_LOCK:
        if subprocess.run(["docker", "image", "inspect", tag], capture_output=True).returncode == 0:
            return tag
        dockerfile = (
            f"FROM {image_name(base)}\nUSER 0:0\nCOPY . /snapshot\n"
            "RUN chmod 0700 /snapshot\nUSER 65534:65534\nWORKDIR /\n"
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
    room = tree_footprint(os.path.realpath(spec.snapshot)) + disk
    cfg = {
        "uid": 65534,
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
        "docker", "run", "-i", "--rm", "--name", name, "--network", "none", "--read-only",
        "--cap-drop", "ALL", *(a for c in ("CHOWN", "SETUID", "SETGID") for a in ("--cap-add", c)),
        "--security-opt", "no-new-privileges",
        "--memory", str(mem), "--memory-swap", str(mem), "--pids-limit", str(lim.max_processes),
        "--cpus", "1", "--tmpfs", f"/tmp:size={disk},mode=1777",
        "--tmpfs", f"{WORKSPACE_ROOT}:size={room},mode=0755,exec", *volumes,
        "--user", "0:0", "-w", "/", "--log-driver", "none", image,
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
    return SnapshotSession(spec, req, rep, kill, "docker", popen.pid)
