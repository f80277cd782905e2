"""PID 1 of a docker sandbox container: runs one execution at a time for the host, over stdio.

Started as ``python3 -I -S -c <this source>`` (uid 65534, no capabilities) with its stdin and
stdout attached by the host; standard library only (the host imports ``FRAME`` from here).

Host -> server: one JSON object per line, ASCII only (the engine scans attached stdin for its
detach keys, which are control bytes that never occur in ASCII JSON):
``{"op": "hello", "warm": [source], "preimport": [module]}`` once, first; then per run
``{"op": "run", "argv", "env", "cwd", "rlimits", "cap", "collect", "collect_cap"}``,
``{"op": "stdin", "data": base64}``, ``{"op": "eof"}`` and ``{"op": "kill"}``.
Server -> host: frames of a type byte, a 4-byte big-endian length and the payload: ``h``
(hello done), ``o``/``e`` (the run's stdout/stderr), ``x`` (end of run: exit status,
collected files, ``cpu_s``; JSON), then ``c`` (cleanup report, JSON) and ``!`` (a bad line,
JSON; the line is skipped). The run's own stdio are pipes this server reads, so
nothing a run prints can forge a frame.

Processes: after the hello the server warms up with the shared warm-run runtime
(``tasksieve.verifiers.sandbox.guest.warmrun``: trusted warm scripts compiled and run once,
modules imported, heap frozen), then forks a *zygote* (``zygote``) before it reads any request,
so the zygote's heap never holds a request, a file or a run's output; the server itself turns
non-dumpable (no ptrace, no ``/proc/1/fd`` or ``/proc/1/mem`` for runs of the same uid). Per
run the server hands the zygote the run's pipes and a private socket carrying the request; the
zygote forks the job, which sets itself up (session, fds, ``oom_score_adj`` 1000, run dir,
rlimits) and execs the command or runs ``python3 -I -S script ...`` warm: as a fresh
``__main__``, or, for a registered script that defines ``warm_main``, that function in the
script's warm namespace. After the job exits the server SIGSTOPs/SIGKILLs every other process
of its uid (PID 1 and the zygote excepted; found by the real uid in ``/proc/N/status``, so
turning non-dumpable hides nothing), drains the pipes, reads the ``collect`` files (regular,
no links, capped) and sends ``x`` (exit status, stray count, files); then it empties the run
dir and sends ``c`` listing what was left: files outside the run dir, IPC objects, or a dead
or stopped zygote; the host recycles such containers. ``cpu_s`` is what the container's cgroup
used from the request to the report (the job, everything it started, and this server's and
the zygote's work for the run: relaying its output, forking it), null where the cgroup's CPU
counter is not visible in the container. Input files are written root-owned by
``docker_writer``, not here.

It does NOT guard against: a run signalling or renicing the zygote (the host recycles the
container when it died or stopped; niceness is not checked); runs of one container seeing
that container's earlier *trusted* warm scripts in memory; or anything the container's
hardening (see ``docker_pool``) does not stop.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import select
import signal
import socket
import struct
from typing import Any

from tasksieve.verifiers.sandbox.docker.guest.cleanup import (
    SCRATCH,
    collect,
    kill_all,
    leftovers,
    process_state,
    reap,
    remove_owned,
)
from tasksieve.verifiers.sandbox.docker.guest.zygote import CHUNK, dumpable, zygote
from tasksieve.verifiers.sandbox.guest.warmrun import WarmScripts, run_warm, warm_up

FRAME = struct.Struct(">cI")
MAX_LINE = 1 << 24
_CPU_FILES = (  # the container's own cgroup, as its cgroup namespace shows it: (file, unit)
    ("/sys/fs/cgroup/cpu.stat", 1e-6),  # cgroup v2: usage_usec
    ("/sys/fs/cgroup/cpuacct/cpuacct.usage", 1e-9),  # cgroup v1: nanoseconds
    ("/sys/fs/cgroup/cpu,cpuacct/cpuacct.usage", 1e-9),
)


def container_cpu() -> float | None:
    """CPU seconds the container's cgroup has used so far (every process in it), or None."""
    for path, unit in _CPU_FILES:
        try:
            with open(path) as fh:
                text = fh.read()
        except OSError:
            continue
        for line in text.splitlines():
            parts = line.split()
            if len(parts) == 1 and parts[0].isdigit():
                return int(parts[0]) * unit
            if len(parts) == 2 and parts[0] == "usage_usec" and parts[1].isdigit():
                return int(parts[1]) * unit
    return None


def send(kind: bytes, payload: bytes) -> None:
    """Write one frame to the host (blocking: the host always drains the stream)."""
    data = memoryview(FRAME.pack(kind, len(payload)) + payload)
    while data:
        data = data[os.write(1, data) :]


def send_json(kind: bytes, obj: dict[str, Any]) -> None:
    """Write one JSON frame to the host."""
    send(kind, json.dumps(obj).encode())


class Run:
    """The one execution in progress."""

    def __init__(self, req: dict[str, Any]) -> None:
        self.cwd = str(req["cwd"])
        if not self.cwd.startswith(SCRATCH + "/r-") or "/" in self.cwd[len(SCRATCH) + 1 :]:
            raise ValueError(f"bad run dir {self.cwd!r}")
        self.cap = None if req.get("cap") is None else int(req["cap"])
        self.collect = [str(n) for n in req.get("collect", [])]
        self.collect_cap = int(req.get("collect_cap", 0))
        self.job = {k: req[k] for k in ("argv", "env", "cwd", "rlimits")}
        if not self.job["argv"] or not all(isinstance(a, str) for a in self.job["argv"]):
            raise ValueError("argv must be a non-empty list of strings")
        self.pid = 0
        self.status: int | None = None
        self.killed = False
        self.limit: str | None = None
        self.sent = {b"o": 0, b"e": 0}
        self.fds: dict[int, bytes] = {}
        self.stdin_fd = -1
        self.pending = bytearray()
        self.eof = False
        self.cpu0 = container_cpu()


class Server:
    """The request loop of PID 1 (single-threaded: one select over every fd)."""

    def __init__(self, zctl: socket.socket, zpid: int) -> None:
        self.zctl, self.zpid = zctl, zpid
        self.zygote_dead = False
        self.run: Run | None = None
        self.inbuf = bytearray()
        self.zbuf = bytearray()
        r, w = os.pipe()
        os.set_blocking(r, False)
        os.set_blocking(w, False)
        self.wake = r
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.set_wakeup_fd(w, warn_on_full_buffer=False)

    def loop(self) -> None:
        """Serve until the host's stream ends."""
        os.set_blocking(0, False)
        while True:
            rd = [0, self.zctl.fileno(), self.wake]
            wr = []
            run = self.run
            if run is not None:
                rd += list(run.fds)
                if run.pending and run.stdin_fd >= 0:
                    wr.append(run.stdin_fd)
            try:
                readable, writable, _ = select.select(rd, wr, [])
            except InterruptedError:
                continue
            if self.wake in readable:
                with contextlib.suppress(OSError):
                    os.read(self.wake, 4096)
                self._reap()
            if 0 in readable:
                self._read_host()
            if self.zctl.fileno() in readable:
                self._read_zygote()
            if run is not None and run is self.run:
                for fd in readable:
                    if fd in run.fds:
                        self._forward(run, fd)
                if writable:
                    self._feed(run)

    # -------------------------------------------------------------- host requests
    def _read_host(self) -> None:
        try:
            chunk = os.read(0, CHUNK)
        except BlockingIOError:
            return
        if not chunk:
            os._exit(0)  # the host is gone: the container stops with us
        self.inbuf += chunk
        while (i := self.inbuf.find(b"\n")) >= 0:
            line = bytes(self.inbuf[:i])
            del self.inbuf[: i + 1]
            self._handle(line)
        if len(self.inbuf) > MAX_LINE:
            self.inbuf.clear()  # resynchronise at the next newline
            send_json(b"!", {"error": f"line longer than {MAX_LINE} bytes"})

    def _handle(self, line: bytes) -> None:
        try:
            msg = json.loads(line)
            op = msg["op"] if isinstance(msg, dict) else None
            run = self.run
            if op == "run":
                if run is not None:
                    raise ValueError("a run is already in progress")
                self._start(Run(msg))
            elif op in ("stdin", "eof", "kill") and run is None:
                pass  # late input for a run that already ended
            elif op == "stdin" and run is not None:
                if not run.eof:
                    run.pending += base64.b64decode(msg["data"], validate=True)
            elif op == "eof" and run is not None:
                run.eof = True
                if not run.pending:
                    self._close_stdin(run)
            elif op == "kill" and run is not None:
                run.killed = True
                kill_all({1, self.zpid})
            else:
                raise ValueError(f"unknown op {op!r}")
        except Exception as e:
            send_json(b"!", {"error": f"bad request: {type(e).__name__}: {e}"[:500]})

    def _start(self, run: Run) -> None:
        if self.zygote_dead:
            raise ValueError("zygote is gone")
        in_r, in_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        mine, theirs = socket.socketpair()
        try:
            socket.send_fds(self.zctl, [b"g"], [in_r, out_w, err_w, theirs.fileno()])
        finally:
            for f in (in_r, out_w, err_w):
                os.close(f)
            theirs.close()
        mine.sendall(json.dumps(run.job).encode())
        mine.close()
        for fd in (in_w, out_r, err_r):
            os.set_blocking(fd, False)
        run.stdin_fd = in_w
        run.fds = {out_r: b"o", err_r: b"e"}
        self.run = run

    # -------------------------------------------------------------- the job's pipes
    def _feed(self, run: Run) -> None:
        try:
            n = os.write(run.stdin_fd, run.pending[:CHUNK])
        except BlockingIOError:
            return
        except OSError:  # the job closed its stdin: drop what it will never read
            n = len(run.pending)
        del run.pending[:n]
        if not run.pending and run.eof:
            self._close_stdin(run)

    def _close_stdin(self, run: Run) -> None:
        if run.stdin_fd >= 0:
            os.close(run.stdin_fd)
            run.stdin_fd = -1
        run.pending.clear()

    def _forward(self, run: Run, fd: int) -> bool:
        """Move one chunk of ``fd`` to the host (at most ``cap + 1`` bytes per stream)."""
        try:
            chunk = os.read(fd, CHUNK)
        except BlockingIOError:
            return True
        except OSError:
            chunk = b""
        kind = run.fds[fd]
        if not chunk:
            os.close(fd)
            del run.fds[fd]
            return False
        if run.cap is not None:
            room = run.cap + 1 - run.sent[kind]
            if len(chunk) >= room and run.limit is None:
                run.limit = "output"
                kill_all({1, self.zpid})
            chunk = chunk[: max(0, room)]
        if chunk:
            run.sent[kind] += len(chunk)
            send(kind, chunk)
        return True

    # -------------------------------------------------------------- the zygote and children
    def _reap(self) -> None:
        for pid, _ in reap():
            if pid == self.zpid:
                self.zygote_dead = True

    def _read_zygote(self) -> None:
        try:
            chunk = self.zctl.recv(4096)
        except OSError:
            chunk = b""
        if not chunk:
            self.zygote_dead = True
            self._reap()
            if self.run is not None:  # no status will come: end the run as lost
                self.run.status = -1
                self._finish(self.run)
            return
        self.zbuf += chunk
        while len(self.zbuf) >= 5:
            kind, value = bytes(self.zbuf[:1]), struct.unpack(">i", self.zbuf[1:5])[0]
            del self.zbuf[:5]
            run = self.run
            if run is None:
                continue
            if kind == b"P":
                run.pid = value
                if run.killed or run.limit:
                    kill_all({1, self.zpid})
            elif kind == b"S":
                run.status = value
                self._finish(run)

    def _finish(self, run: Run) -> None:
        """The job exited: kill the rest, drain, collect, clean up and report."""
        strays = kill_all({1, self.zpid})
        self._close_stdin(run)
        deadline = 1.0
        while run.fds and deadline > 0:
            ready, _, _ = select.select(list(run.fds), [], [], 0.05)
            deadline -= 0.05 if not ready else 0.0
            for fd in ready:
                self._forward(run, fd)
        for fd in list(run.fds):
            os.close(fd)
        run.fds.clear()
        files = collect(run.cwd, run.collect, run.collect_cap) if run.status != -1 else {}
        st = run.status if run.status is not None else -1
        if st < 0:
            code = None
        elif os.WIFSIGNALED(st):
            code = 128 + os.WTERMSIG(st)
        else:
            code = os.WEXITSTATUS(st)
        self.run = None
        cpu = container_cpu()
        cpu_s = None if cpu is None or run.cpu0 is None else round(max(0.0, cpu - run.cpu0), 6)
        report: dict[str, Any] = {"code": code, "killed": run.killed, "limit": run.limit}
        report.update(strays=strays, cpu_s=cpu_s)
        send_json(b"x", {**report, "files": files})
        send_json(b"c", {"left": self._clean(run.cwd)[:10]})

    def _clean(self, cwd: str) -> list[str]:
        """Empty the run dir and list what is left (after ``x``: off the caller's path)."""
        with contextlib.suppress(Exception):
            remove_owned(cwd)
        try:
            left = leftovers(cwd)
        except Exception as e:
            left = [f"check failed: {e}"]
        self._reap()
        if self.zygote_dead:
            left.append("zygote gone")
        elif process_state(self.zpid) not in ("S", "R", "D"):
            left.append("zygote not idle")
        return left


def boot() -> tuple[dict[str, Any], WarmScripts]:
    """Read the hello, warm up, fork the zygote and serve; returns only in a warm job."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    line = bytearray()
    while not line.endswith(b"\n"):
        chunk = os.read(0, CHUNK)
        if not chunk:
            os._exit(0)
        line += chunk
    hello = json.loads(line)
    warm = warm_up(list(hello.get("warm", [])), list(hello.get("preimport", [])))
    dumpable(False)
    zctl, theirs = socket.socketpair()
    zpid = os.fork()
    if zpid == 0:
        zctl.close()
        signal.signal(signal.SIGINT, signal.default_int_handler)
        return zygote(theirs), warm
    theirs.close()
    send_json(b"h", {"zygote": zpid})
    Server(zctl, zpid).loop()
    raise AssertionError("unreachable")


if __name__ == "__main__":
    _req, _warm = boot()
    del boot
    run_warm(_req, _warm)
