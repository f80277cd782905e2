"""The ``docker`` sandbox: executions in a warm pool of hardened containers, no exec per run.

Each execution takes a whole container from the pool (see ``docker_pool`` for the hardening).
Its files go to the container's root writer (``docker_writer``: a fresh run dir under the
``/scratch`` tmpfs, inputs root-owned and read-only in a sticky dir) and its command to the
container's PID 1 (``docker_server``), which forks it as uid 65534 in a new session under
rlimits (address space, CPU seconds, file size, no core dumps), streams its output back
framed, and after it exits kills what is left, collects the requested files and reports what
remains; the container's cgroup bounds total memory (plus scratch), processes and CPU share.
Both talk over attached stdio streams, so a run costs messages, not ``docker exec`` calls.
The wall clock is enforced here: on expiry the server kills every process of the run. A
container is recycled after any limit hit, a stray process, files left outside the run dir,
SysV/POSIX IPC objects or a broken stream; the cleanup report is read when the container is
next acquired (idle containers are used oldest first), off the caller's path.

It does NOT guard against: kernel exploits beyond Docker's default seccomp profile; reading
world-readable files of the image itself (it holds nothing secret); timing side channels; a
compromised or remote engine; and the memory limit is inferred, not reported, when the
cgroup OOM killer fires (a run killed by SIGKILL that nobody asked for).
"""

from __future__ import annotations

import base64
import math
import time
import uuid
from typing import Any

from tasksieve.verifiers.sandbox.base import (
    Capabilities,
    Execution,
    Limits,
    Sandbox,
    SandboxUnavailable,
)
from tasksieve.verifiers.sandbox.docker.execution import (
    Outcome,
    RunProcess,
    collect_run,
    settle,
    start,
)
from tasksieve.verifiers.sandbox.docker.image import image_name
from tasksieve.verifiers.sandbox.docker.pool import SCRATCH, USER, Pool, Shape, Slot
from tasksieve.verifiers.sandbox.docker.workspace import open_docker_workspace
from tasksieve.verifiers.sandbox.support import check_name, limit_from
from tasksieve.verifiers.sandbox.workspace import Workspace, WorkspaceSpec

_PATH = "/usr/local/bin:/usr/bin:/bin"
_SIGKILL_EXIT = 128 + 9
_FILES_TIMEOUT_S = 30.0


class DockerProcess:
    """A started execution: ``popen`` (pipes, poll, wait), ``kill`` and ``close``."""

    def __init__(self, popen: RunProcess, pool: Pool, slot: Slot, run_dir: str) -> None:
        self.popen, self.pool, self.slot, self.scratch = popen, pool, slot, run_dir
        self.started = time.monotonic()
        self.limit_hit: str | None = None
        self._closed = False

    @property
    def cpu_s(self) -> float | None:
        """The container's CPU seconds during the run, once it ended (None before, or unseen)."""
        return self.popen.outcome.cpu_s if self.popen.outcome is not None else None

    def kill(self) -> None:
        """Kill every process of the execution (its container serves only this one)."""
        self.popen.kill()

    def close(self) -> None:
        """Kill what is left and hand the container back; its cleanup is checked lazily."""
        if self._closed:
            return
        self._closed = True
        strict = self.popen.poll() is not None and not self.popen.killed
        self.popen.close()
        popen, hit = self.popen, self.limit_hit
        self.pool.release(
            self.slot, dirty=False, settle=lambda: hit is None and popen.finish(strict)
        )

    def read_files(self, names: tuple[str, ...], cap: int) -> dict[str, bytes]:
        """Files collected at the end of the run (``collect`` given to ``spawn``), capped.

        Call after the run ended (``popen.wait``); an unfinished run is killed first.
        """
        self.popen.kill()
        self.popen.wait(10.0)
        files = self.popen.outcome.files if self.popen.outcome else {}
        return {n: d for n, d in files.items() if n in names and len(d) <= cap}


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
        # The container's PID 1 is the server, so a run may not signal every process it sees.
        self.capabilities = Capabilities(spawn=True, warm_scripts=True, workspaces=True)

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
            "per_run_exec": False,
        }

    def close(self) -> None:
        """Remove every container of the pool."""
        self.pool.close()

    def open_workspace(self, spec: WorkspaceSpec) -> Workspace:
        """A live workspace in a container of its own (``docker.workspace``); the caller
        closes it."""
        return open_docker_workspace(spec, self.image)

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
            slot, run_dir = self._prepare(files, collect, limits)
        except ValueError:
            raise
        except Exception as e:
            return Execution(None, b"", b"", 0.0, infra_error=f"sandbox start failed: {e}")
        limit_hit: str | None = "infra"
        try:
            request = self._request(run_dir, command, limits, collect, limits.max_output_bytes)
            start(slot.server, request, stdin)
            outcome, out, err, timed_out = collect_run(
                slot.server,
                t0 + limits.wall_s,
                limits.max_output_bytes,
                lambda: slot.server.send({"op": "kill"}),
            )
            limit_hit = _limit(outcome, out, err, timed_out, limits.max_output_bytes)
        except Exception as e:
            outcome = Outcome(error=f"{type(e).__name__}: {e}")
            out, err = bytearray(), bytearray()
        finally:
            ok = limit_hit is None and outcome.usable(strict=True)
            self.pool.release(slot, dirty=not ok, settle=lambda: settle(slot.server))
        if outcome.error is not None:
            return Execution(
                None, bytes(out), bytes(err), time.monotonic() - t0, infra_error=outcome.error
            )
        cap = limits.max_output_bytes
        return Execution(
            exit_code=None if limit_hit == "wall" else outcome.code,
            stdout=bytes(out[:cap]),
            stderr=bytes(err[:cap]),
            duration_s=time.monotonic() - t0,
            limit_hit=limit_hit,
            stdout_truncated=len(out) > cap,
            stderr_truncated=len(err) > cap,
            files=outcome.files,
            cpu_s=outcome.cpu_s,
        )

    def spawn(
        self,
        files: dict[str, bytes | str],
        command: list[str],
        limits: Limits,
        collect: tuple[str, ...] = (),
    ) -> DockerProcess:
        """Start ``command`` in a pooled container with piped stdin/stdout/stderr; don't wait.

        The caller owns the result and must call ``close()``; the wall limit is the caller's.
        ``collect`` files are read when the run ends (``read_files``).
        """
        slot, run_dir = self._prepare(files, collect, limits)
        try:
            start(slot.server, self._request(run_dir, command, limits, collect, None), None)
        except BaseException:
            self.pool.release(slot, dirty=True)
            raise
        return DockerProcess(RunProcess(slot.server), self.pool, slot, run_dir)

    # ------------------------------------------------------------------ internals
    def _shape(self, limits: Limits) -> Shape:
        return Shape(limits.memory_mb, limits.scratch_mb, limits.max_processes, self.cpus)

    def _prepare(
        self, files: dict[str, bytes | str], collect: tuple[str, ...], limits: Limits
    ) -> tuple[Slot, str]:
        """A container from the pool with a fresh run dir holding ``files``."""
        for name in (*files, *collect):
            check_name(name)
        slot = self.pool.acquire(self._shape(limits))
        run_dir = f"{SCRATCH}/r-{uuid.uuid4().hex[:12]}"
        try:
            encoded = {
                n: base64.b64encode(c.encode() if isinstance(c, str) else c).decode()
                for n, c in files.items()
            }
            slot.writer.send({"op": "files", "dir": run_dir, "files": encoded})
            reply = slot.writer.recv_json(b"f", _FILES_TIMEOUT_S)
            if not reply.get("ok"):
                raise RuntimeError(f"could not write the run's files: {reply.get('error')}")
        except BaseException:
            self.pool.release(slot, dirty=True)
            raise
        return slot, run_dir

    def _request(
        self,
        run_dir: str,
        command: list[str],
        limits: Limits,
        collect: tuple[str, ...],
        cap: int | None,
    ) -> dict[str, Any]:
        env = {"PATH": _PATH, "HOME": run_dir, "TMPDIR": run_dir, "LANG": "C.UTF-8"}
        return {
            "argv": list(command),
            "env": env,
            "cwd": run_dir,
            "rlimits": _rlimits(limits),
            "cap": cap,
            "collect": list(collect),
            "collect_cap": limits.max_file_bytes,
        }


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
        raise SandboxUnavailable(
            f"no Docker engine reachable ({type(e).__name__}: {e}); start dockerd "
            "(or set DOCKER_HOST), then run `tasksieve sandbox build-image`"
        ) from e
    return client


def _check_image(client: Any, image: str) -> None:
    from tasksieve.verifiers.sandbox.docker.image import image_exists

    if not image_exists(client, image):
        raise SandboxUnavailable(
            f"sandbox image {image!r} not found; run `tasksieve sandbox build-image` "
            "(or pull an image with python3 and set TASKSIEVE_SANDBOX_IMAGE)"
        )


def _limit(
    outcome: Outcome, out: bytearray, err: bytearray, timed_out: bool, cap: int
) -> str | None:
    """The limit that stopped a run, from the host's clock, the caps and its exit status."""
    if timed_out:
        return "wall"
    if len(out) > cap or len(err) > cap or outcome.limit == "output":
        return "output"
    if outcome.code == _SIGKILL_EXIT and not outcome.killed:
        return "memory"  # only the cgroup OOM killer sends SIGKILL unasked
    return None if outcome.code is None else limit_from(outcome.code, bytes(err))


def _rlimits(limits: Limits) -> dict[str, list[int]]:
    """The rlimits of one run (address space, CPU seconds, file size, no core dumps)."""
    mem = limits.memory_mb * 1024 * 1024
    cpu = max(1, math.ceil(limits.cpu_s))
    return {
        "RLIMIT_AS": [mem, mem],
        "RLIMIT_CPU": [cpu, cpu + 1],
        "RLIMIT_FSIZE": [limits.max_file_bytes, limits.max_file_bytes],
        "RLIMIT_CORE": [0, 0],
    }
