"""Guest: the session agent of a workspace, serving its host over frames on stdin/stdout.

Standard library only; a backend's entry program (the process backend's ``wsinit``, the
docker backend's ``wsdocker``) sets the workspace up and calls ``serve``. Requests are frames
(``verifiers.sandbox.guest.wsframe``) with an ``op``: ``exec`` (in the persistent shell),
``run`` (a fresh process), ``write``/``read`` (a file under the workspace root), ``changes``
(what the workspace holds, for the host's diff: ``wsdiff``), ``ping`` and ``close``; a
request with ``"reset": true`` (the first one of a pooled session's new owner) restarts the
lifetime clock first. Each request gets one reply frame,
``{"ok": true, ...}`` or ``{"ok": false, "error": ..., "kind": "path"|"other"}``. An ``exec``
or ``run`` reply carries ``cpu``: the user plus system seconds the session's processes used
since the previous command's reply (so a background job's time lands in the next command), or
null when the process tree was too big to read in time (``cputime.live_cpu``). The agent is the
session's pid 1, so every process of it is either live below the agent (read from ``/proc``,
with what each reaped) or reaped by the agent itself (``RUSAGE_CHILDREN``); the agent's own
time is not counted. Reaped processes are counted in clock ticks, so one short command may
read a tick high or low; the sum over a session is exact to a tick. The agent
ends the session itself (and so, as its namespace's init or its container's main process,
every process in it) when its input closes, on ``close``, after ``idle_s`` without a request
and at ``lifetime_s`` (a command running then is stopped and answered with
``ended="session"``).

File paths are relative to the workspace root; ``..``, absolute paths and every symlink on the
way (final component included) are refused, each component opened with ``O_NOFOLLOW``
relative to the one before, so a link the code in the session planted cannot lead the agent
(which holds more privileges than the shell) elsewhere. Files and directories the agent
creates are given to the session's user (``owner``).
"""

from __future__ import annotations

import os
import resource
import select
import stat
import sys
import time
from collections.abc import Callable
from typing import Any

from tasksieve.verifiers.sandbox.guest.wsdiff import changes
from tasksieve.verifiers.sandbox.guest.wsframe import b64, frame_recv, frame_send, unb64
from tasksieve.verifiers.sandbox.guest.wsshell import Children, Shell, run_fresh
from tasksieve.verifiers.sandbox.process.guest.cputime import live_cpu

WS_ROOT = "/workspace"


class PathRefused(ValueError):
    """A path that leaves the workspace root, or goes through a symlink."""


def _parts(path: str) -> list[str]:
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if path.startswith("/") or not parts or ".." in parts or "\0" in path:
        raise PathRefused(f"path {path!r} must be relative and stay under {WS_ROOT}")
    return parts


def _walk_dirs(parts: list[str], create: bool, owner: tuple[int, int] | None) -> int:
    """A descriptor of the directory holding ``parts[-1]`` (symlinks refused)."""
    fd = os.open(WS_ROOT, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for part in parts[:-1]:
            if create and not os.path.lexists(f"/proc/self/fd/{fd}/{part}"):
                os.mkdir(part, 0o755, dir_fd=fd)
                if owner:
                    os.chown(part, *owner, dir_fd=fd, follow_symlinks=False)
            try:
                nfd = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except OSError as e:
                raise PathRefused(f"{part!r} is not a directory in {WS_ROOT} ({e})") from e
            os.close(fd)
            fd = nfd
    except BaseException:
        os.close(fd)
        raise
    return fd


def write_file(path: str, data: bytes, owner: tuple[int, int] | None) -> None:
    """Write ``data`` at ``path`` under the root (see the module doc)."""
    parts = _parts(path)
    dfd = _walk_dirs(parts, True, owner)
    try:
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
        try:
            fd = os.open(parts[-1], flags, 0o644, dir_fd=dfd)
        except OSError as e:
            if os.path.islink(f"/proc/self/fd/{dfd}/{parts[-1]}"):
                raise PathRefused(f"{path!r} is a symlink") from e
            raise
        with open(fd, "wb") as fh:
            if owner:
                os.fchown(fd, *owner)
            fh.write(data)
    finally:
        os.close(dfd)


def read_file(path: str, max_bytes: int) -> bytes | None:
    """The bytes at ``path`` under the root (None: no such file)."""
    parts = _parts(path)
    try:
        dfd = _walk_dirs(parts, False, None)
    except PathRefused:
        return None
    try:
        fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dfd)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise PathRefused(f"{path!r} cannot be read ({e})") from e
    finally:
        os.close(dfd)
    with open(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise PathRefused(f"{path!r} is not a regular file")
        return fh.read(max_bytes)


def session_cpu() -> float | None:
    """CPU seconds of every process this agent (the session's pid 1) started, ever, so far."""
    live = live_cpu(os.getpid())
    if live is None:
        return None
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    return live + reaped.ru_utime + reaped.ru_stime


def _encode(result: dict[str, Any]) -> dict[str, Any]:
    out, err = result.pop("out"), result.pop("err")
    return {"ok": True, **result, "out": b64(out), "err": b64(err)}


class Agent:
    """One session: its shell, its limits, its deadlines (see the module doc)."""

    def __init__(
        self,
        cfg: dict[str, Any],
        drop: Callable[[], None],
        upper_fd: int | None,
        owner: tuple[int, int] | None,
    ) -> None:
        self.cfg, self.drop, self.upper_fd, self.owner = cfg, drop, upper_fd, owner
        self.kids = Children()
        self.env: dict[str, str] = dict(cfg["env"])
        self.shell = Shell(self.env, WS_ROOT, drop, self.kids)
        self.started = self.last = time.monotonic()
        self.cpu_mark = session_cpu()

    def _cpu_since(self) -> float | None:
        """CPU seconds since the last reading (see the module doc); this one is the next mark."""
        now, before = session_cpu(), self.cpu_mark
        self.cpu_mark = now
        return None if now is None or before is None else round(max(0.0, now - before), 6)

    def deadline(self) -> float:
        """When the session ends unless a request comes (idle) or at all (lifetime)."""
        return min(self.last + self.cfg["idle_s"], self.started + self.cfg["lifetime_s"])

    def handle(self, req: dict[str, Any]) -> dict[str, Any]:
        """The reply to one request."""
        op = req.get("op")
        end_of_life = self.started + self.cfg["lifetime_s"]
        if op in ("exec", "run"):
            wall = float(req.get("timeout") or self.cfg["command_wall_s"])
            deadline = min(time.monotonic() + wall, end_of_life)
            cap = int(self.cfg["max_output_bytes"])
            t0 = time.monotonic()
            if op == "exec":
                res = self.shell.exec(str(req["cmd"]), deadline, cap)
            else:
                argv, cwd = [str(a) for a in req["argv"]], str(req.get("cwd") or WS_ROOT)
                res = run_fresh(argv, self.env, cwd, self.drop, self.kids, deadline, cap)
            if res["ended"] == "wall" and time.monotonic() >= end_of_life:
                res["ended"] = "session"
            return _encode({**res, "dur": time.monotonic() - t0, "cpu": self._cpu_since()})
        if op == "write":
            write_file(str(req["path"]), unb64(req["data"]), self.owner)
            return {"ok": True}
        if op == "read":
            data = read_file(str(req["path"]), int(req.get("max", 1_000_000)))
            return {"ok": True, "data": None if data is None else b64(data)}
        if op == "changes":
            return {"ok": True, **changes(WS_ROOT, self.upper_fd)}
        if req.get("reset"):  # the first request of a pooled session's new owner
            self.started = time.monotonic()
        if op in ("ping", "close"):
            return {"ok": True}
        return {"ok": False, "error": f"unknown op {op!r}", "kind": "other"}

    def loop(self) -> None:
        """Serve requests on fd 0 until the input closes, ``close``, idle or lifetime."""
        while True:
            left = self.deadline() - time.monotonic()
            if left <= 0:
                return
            ready, _, _ = select.select([0], [], [], min(left, 5.0))
            self.kids.reap()
            if not ready:
                continue
            req = frame_recv(0)
            if req is None:
                return
            self.last = time.monotonic()
            try:
                reply = self.handle(req)
            except PathRefused as e:
                reply = {"ok": False, "error": str(e), "kind": "path"}
            except (OSError, ValueError, KeyError, TypeError) as e:
                reply = {"ok": False, "error": f"{type(e).__name__}: {e}", "kind": "other"}
            self.last = time.monotonic()
            frame_send(1, reply)
            over = time.monotonic() >= self.started + self.cfg["lifetime_s"]
            if req.get("op") == "close" or over:
                return


def serve(
    cfg: dict[str, Any],
    drop: Callable[[], None],
    upper_fd: int | None,
    owner: tuple[int, int] | None,
    hello: dict[str, Any],
) -> None:
    """Say hello on fd 1, then serve until the session ends; the caller then exits."""
    agent = Agent(cfg, drop, upper_fd, owner)
    frame_send(1, {"ok": True, **hello})
    try:
        agent.loop()
    finally:
        agent.shell.stop()
        sys.stdout.flush()
