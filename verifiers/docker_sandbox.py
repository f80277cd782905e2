"""The ``docker`` sandbox: executions in a warm pool of hardened containers (docker SDK).

Each execution takes a whole container from the pool (see ``docker_pool`` for the hardening),
gets a fresh run dir under the ``/scratch`` tmpfs holding its files (root-owned, read-only, in
a sticky dir), and runs as uid 65534 via the engine's exec API under ``prlimit`` (address
space, CPU seconds, file size, no core dumps); the container's cgroup bounds total memory
(plus scratch), processes and CPU share. The wall clock is enforced here: on expiry every
process in the container is killed. A container is recycled after any limit hit, a stray
process, files left outside the run dir or SysV/POSIX IPC objects.

It does NOT guard against: kernel exploits beyond Docker's default seccomp profile; reading
world-readable files of the image itself (it holds nothing secret); timing side channels; a
compromised or remote engine; and the memory limit is inferred, not reported, when the
cgroup OOM killer fires (a run killed by SIGKILL that this process did not send).
"""

from __future__ import annotations

import io
import math
import os
import socket
import subprocess
import tarfile
import time
import uuid
from typing import Any

from verifiers.base import Execution, Limits, Sandbox
from verifiers.docker_exec import ExecProcess, hijack
from verifiers.docker_image import image_name
from verifiers.docker_pool import SCRATCH, USER, Pool, Shape, Slot
from verifiers.pipes import Pump, drain_until
from verifiers.process_support import check_name, limit_from

_PATH = "/usr/local/bin:/usr/bin:/bin"
_SIGKILL_EXIT = 128 + 9
_SETUP = f"rm -rf {SCRATCH}/r-*; exec tar -x -C {SCRATCH} -f -"
# Prints "1" then at most $2 bytes of file $1 when it is a regular file; nothing otherwise.
_READ = 'test -f "$1" && printf 1 && exec head -c "$2" -- "$1"'


class DockerProcess:
    """A started execution: ``popen`` (pipes, poll, wait), ``kill`` and ``close``."""

    def __init__(self, popen: ExecProcess, pool: Pool, slot: Slot, run_dir: str) -> None:
        self.popen, self.pool, self.slot, self.scratch = popen, pool, slot, run_dir
        self.started = time.monotonic()
        self.collect_fd: int | None = None
        self.limit_hit: str | None = None
        self._closed = False

    def kill(self) -> None:
        """Kill every process of the execution (its container serves only this one)."""
        self.popen.kill()

    def close(self) -> None:
        """Stop the relay, clean the container and hand it back (or recycle it)."""
        if self._closed:
            return
        self._closed = True
        try:
            exited = not self.popen.killed and self.popen.poll() is not None
        except Exception:
            exited = False
        self.popen.close()
        dirty = self.limit_hit is not None or self.popen.killed
        self.pool.release(self.slot, self.scratch, dirty=dirty, strict=exited)

    def read_files(self, names: tuple[str, ...], cap: int) -> dict[str, bytes]:
        """Regular files ``names`` of the run dir, each at most ``cap`` bytes (others left out)."""
        found: dict[str, bytes] = {}
        for name in names:
            data = _get_file(self.pool.api, self.slot.container_id, f"{self.scratch}/{name}", cap)
            if data is not None:
                found[name] = data
        return found


class DockerSandbox(Sandbox):
    """Runs commands in pooled, hardened Docker containers."""

    name = "docker"

    def __init__(
        self,
        image: str | None = None,
        pool_size: int = 4,
        cpus: float = 1.0,
        python: str = "/usr/bin/python3",
        client: Any = None,
    ) -> None:
        if pool_size < 1 or cpus <= 0:
            raise ValueError(f"need pool_size >= 1 and cpus > 0, got {pool_size}, {cpus}")
        self.image = image_name(image)
        self.python = python
        self.cpus = cpus
        self.client = client or _connect()
        _check_image(self.client, self.image)
        self.pool = Pool(self.client, self.image, pool_size)
        self.pool.sweep()
        self.pool.warm(self._shape(Limits()), pool_size)

    # ------------------------------------------------------------------ public API
    def describe(self) -> dict[str, str | bool]:
        """Backend, image, pool size and the container hardening applied."""
        return {
            "backend": self.name,
            "image": self.image,
            "pool_size": str(self.pool.size),
            "network": "none",
            "read_only_root": True,
            "capabilities": "none",
            "user": USER,
            "weak": False,
            "filesystem_isolated": True,
        }

    def close(self) -> None:
        """Remove every container of the pool."""
        self.pool.close()

    def run(
        self,
        files: dict[str, bytes | str],
        command: list[str],
        limits: Limits,
        stdin: bytes = b"",
        collect: tuple[str, ...] = (),
    ) -> Execution:
        """Write ``files`` into a fresh run dir, run ``command`` there, return what it did."""
        t0 = time.monotonic()
        try:
            proc = self.spawn(files, command, limits)
        except ValueError:
            raise
        except Exception as e:
            return Execution(None, b"", b"", 0.0, infra_error=f"sandbox start failed: {e}")
        try:
            return self._supervise(proc, limits, stdin, collect, t0)
        finally:
            proc.close()

    def spawn(
        self,
        files: dict[str, bytes | str],
        command: list[str],
        limits: Limits,
        collect: tuple[str, ...] = (),
    ) -> DockerProcess:
        """Start ``command`` in a pooled container with piped stdin/stdout/stderr; don't wait.

        The caller owns the result and must call ``close()``; the wall limit is the caller's.
        ``collect`` is accepted for interface parity; read files with ``read_files``.
        """
        for name in (*files, *collect):
            check_name(name)
        slot = self.pool.acquire(self._shape(limits))
        run_dir = f"{SCRATCH}/r-{uuid.uuid4().hex[:12]}"
        api = self.pool.api
        try:
            _put_files(api, slot.container_id, _tar(run_dir[len(SCRATCH) + 1 :], files))
            eid = api.exec_create(
                slot.container_id,
                [*_limit_prefix(limits), *command],
                stdin=True,
                user=USER,
                workdir=run_dir,
                environment={"PATH": _PATH, "HOME": run_dir, "TMPDIR": run_dir, "LANG": "C.UTF-8"},
            )["Id"]
            sock, prefix = hijack(api, eid)
        except BaseException:
            self.pool.release(slot, run_dir, dirty=True, strict=False)
            raise
        popen = ExecProcess(api, eid, sock, prefix, killer=lambda: self.pool.kill_all(slot))
        return DockerProcess(popen, self.pool, slot, run_dir)

    # ------------------------------------------------------------------ internals
    def _shape(self, limits: Limits) -> Shape:
        return Shape(limits.memory_mb, limits.scratch_mb, limits.max_processes, self.cpus)

    def _supervise(
        self,
        proc: DockerProcess,
        limits: Limits,
        stdin: bytes,
        collect: tuple[str, ...],
        t0: float,
    ) -> Execution:
        p = proc.popen
        assert p.stdin and p.stdout and p.stderr
        pump = Pump()
        out = pump.add_reader(p.stdout.fileno(), limits.max_output_bytes)
        err = pump.add_reader(p.stderr.fileno(), limits.max_output_bytes)
        stdin_fd = os.dup(p.stdin.fileno())  # the pump owns (and closes) this copy
        p.stdin.close()
        pump.write(stdin_fd, stdin, close_when_done=True)
        deadline = t0 + limits.wall_s
        limit_hit: str | None = None
        next_poll = time.monotonic() + 0.25
        while True:
            if out.overflow or err.overflow:
                limit_hit = "output"
                break
            if out.eof and err.eof:
                break
            now = time.monotonic()
            if now >= deadline:
                limit_hit = "wall"
                break
            if now >= next_poll:  # exited while something else holds its pipes open
                next_poll = now + 0.25
                if p.poll() is not None:
                    drain_until(pump, lambda: out.eof and err.eof, now + 0.2)
                    break
            pump.poll(min(deadline - now, 0.25))
        code: int | None = None
        if limit_hit is None:
            try:
                code = p.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                limit_hit = "wall"
        if limit_hit is not None:
            proc.kill()
            try:
                code = p.wait(timeout=5.0)
            except subprocess.TimeoutExpired:
                code = None
        pump.close()
        files = proc.read_files(collect, limits.max_file_bytes) if collect else {}
        stderr = bytes(err.buf)
        if limit_hit is None and code is not None:
            if code == _SIGKILL_EXIT and not p.killed:
                limit_hit = "memory"  # only the cgroup OOM killer sends SIGKILL unasked
            else:
                limit_hit = limit_from(code, stderr)
        proc.limit_hit = limit_hit
        return Execution(
            exit_code=None if limit_hit == "wall" else code,
            stdout=bytes(out.buf),
            stderr=stderr,
            duration_s=time.monotonic() - t0,
            limit_hit=limit_hit,
            stdout_truncated=out.overflow,
            stderr_truncated=err.overflow,
            files=files,
        )


# ---------------------------------------------------------------------- helpers
def _connect() -> Any:
    try:
        import docker
    except ImportError as e:
        raise ImportError(
            "the docker sandbox needs the docker SDK: pip install 'tasksieve[docker]'"
        ) from e
    try:
        client = docker.from_env()
        client.ping()
    except Exception as e:
        raise RuntimeError(
            f"no Docker engine reachable ({type(e).__name__}: {e}); start dockerd "
            "(or set DOCKER_HOST), then run `tasksieve sandbox build-image`"
        ) from e
    return client


def _check_image(client: Any, image: str) -> None:
    from verifiers.docker_image import image_exists

    if not image_exists(client, image):
        raise RuntimeError(
            f"sandbox image {image!r} not found; run `tasksieve sandbox build-image` "
            "(or pull an image with python3 and set TASKSIEVE_SANDBOX_IMAGE)"
        )


def _limit_prefix(limits: Limits) -> list[str]:
    mem = limits.memory_mb * 1024 * 1024
    cpu = max(1, math.ceil(limits.cpu_s))
    return [
        "prlimit",
        f"--as={mem}",
        f"--cpu={cpu}:{cpu + 1}",
        f"--fsize={limits.max_file_bytes}",
        "--core=0",
        "--",
    ]


def _tar(run_dir: str, files: dict[str, bytes | str]) -> bytes:
    """A tar of ``run_dir`` (root-owned, sticky, world-writable) holding read-only ``files``."""
    buf = io.BytesIO()
    now = time.time()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        dirs = {run_dir: 0o1777}
        for name in files:
            parts = name.split("/")[:-1]
            for i in range(1, len(parts) + 1):
                dirs.setdefault(f"{run_dir}/{'/'.join(parts[:i])}", 0o755)
        for d, mode in dirs.items():
            info = tarfile.TarInfo(d)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, mode, now
            tar.addfile(info)
        for name, content in files.items():
            data = content.encode() if isinstance(content, str) else content
            info = tarfile.TarInfo(f"{run_dir}/{name}")
            info.size, info.mode, info.mtime = len(data), 0o444, now
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _put_files(api: Any, cid: str, tar: bytes) -> None:
    """Extract ``tar`` into the scratch tmpfs as root without capabilities (files stay root's).

    ``put_archive`` cannot write into a tmpfs of a read-only container, so a short exec
    streams the archive to ``tar`` over its stdin. It first removes earlier runs' dirs, whose
    root-owned input files the unprivileged cleanup could not.
    """
    eid = api.exec_create(cid, ["sh", "-c", _SETUP], stdin=True, user="0:0")
    sock, prefix = hijack(api, eid["Id"])
    out = bytearray(prefix)
    try:
        sock.sendall(tar)
        sock.shutdown(socket.SHUT_WR)
        while chunk := sock.recv(65536):
            out += chunk
    finally:
        sock.close()
    deadline = time.monotonic() + 10.0
    while (info := api.exec_inspect(eid["Id"])).get("Running") and time.monotonic() < deadline:
        time.sleep(0.002)
    if info.get("ExitCode") != 0:
        text = bytes(out[8:]).decode(errors="replace").strip()[-300:]
        raise RuntimeError(f"could not write the run's files ({info.get('ExitCode')}): {text}")


def _get_file(api: Any, cid: str, path: str, cap: int) -> bytes | None:
    """One regular file out of the container, or None if absent, not regular or over ``cap``.

    ``get_archive`` cannot see the scratch tmpfs either, so an exec prints it.
    """
    try:
        eid = api.exec_create(
            cid, ["sh", "-c", _READ, "read", path, str(cap + 1)], user=USER, stderr=False
        )
        out = api.exec_start(eid["Id"])
    except Exception:
        return None
    if not isinstance(out, bytes) or not out.startswith(b"1") or len(out) > cap + 1:
        return None
    return out[1:]
