"""Pair runs on the fork server: a candidate and its tests forked from one per-run init.

One request starts one pid/mount/net/ipc/uts namespace set whose init forks the candidate
(uid A) and then becomes the tests process (uid B, pid 1). The two talk over a private pipe
pair; only the tests process holds the results pipe the host reads, and the candidate gets
its stdin/stdout from the tests process and its stderr from the host (capped, never parsed for
the verdict). The tests' files are written after the candidate was forked, into a 0700
directory of uid B, so they are never in the candidate's memory or reach.

Compared with two separate runs this shares, between the candidate and its own tests only:
the loopback interface, the ipc namespace, the /tmp tmpfs and its size limit, and a /proc
mounted with ``hidepid=2`` (neither sees the other's processes). It does NOT guard against
the candidate starving its tests of CPU or /tmp space (the wall limit ends both), nor the
rest of what ``tasksieve.verifiers.sandbox.process.forkserver`` lists.

``cpu_s`` (known once the server reported the end: ``wait``) is the CPU time of the candidate
and the tests together, every process of the run, as the server measures it.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import struct
import threading
from collections.abc import Iterable, Iterator
from typing import Any

from tasksieve.verifiers.sandbox.pipes import Pump, Reader
from tasksieve.verifiers.sandbox.process.forkserver import ForkServer, cpu_of
from tasksieve.verifiers.sandbox.process.uids import UIDS


class PairProcess:
    """A started pair run: results and stderr pipes, and the server's status socket."""

    def __init__(self, results: int, stderr: int, status: socket.socket, uids: list[int]) -> None:
        self.pump = Pump()
        self.results: Reader = self.pump.add_reader(results, 4_000_000)
        self.stderr: Reader = self.pump.add_reader(stderr, 8192)
        self._fds = [results, stderr]
        self._status = status
        self._uids = uids
        self.returncode: int | None = None
        self.infra_error: str | None = None
        self.cpu_s: float | None = None  # every process of the run, with the end (forkserver)
        self._buf = b""

    def kill(self) -> None:
        """Kill the whole pair (the server SIGKILLs the namespace's init)."""
        if self.returncode is None:
            with contextlib.suppress(OSError):
                self._status.send(b"k")

    def wait(self, timeout: float) -> int | None:
        """Wait up to ``timeout`` s for the server to report the namespace empty."""
        self._status.settimeout(timeout)
        while self.returncode is None:
            try:
                chunk = self._status.recv(4096)
            except (TimeoutError, BlockingIOError):
                return None
            except OSError:
                chunk = b""
            self._buf += chunk
            while b"\n" in self._buf:
                line, self._buf = self._buf.split(b"\n", 1)
                with contextlib.suppress(ValueError, AttributeError, TypeError):
                    msg = json.loads(line)
                    if "error" in msg:
                        self.infra_error = str(msg["error"])[:500]
                    self._note(msg)
                    if "rc" in msg:
                        self.cpu_s = cpu_of(msg)
                        self.returncode = int(msg["rc"])
            if not chunk and self.returncode is None:
                self.infra_error = self.infra_error or "fork server went away"
                self.returncode = -9
        return self.returncode

    def _note(self, msg: dict[str, Any]) -> None:
        """A status message from inside the run (none for a pair; see ``MultiProcess``)."""

    def close(self, linger: bool = False) -> None:
        """Kill what is left, release the pipes, wait (up to 30 s) until the namespace is empty.

        With ``linger`` the server's confirmation is not waited for here (so processes of
        the pair may still exist for a moment after this returns): the run is handed
        to ``reap_lingering`` (called on every start and close), which returns its uids only
        when the server reports the namespace gone, so no uid is reused while in use.
        """
        self.kill()
        self.pump.close()
        for fd in self._fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._fds = []
        if linger and self.wait(0.0) is None:
            with _LINGER_LOCK:
                _LINGERING.append(self)
        else:
            self._release(30.0)
        reap_lingering()

    def _release(self, timeout: float) -> None:
        self.wait(timeout)
        self._status.close()
        if self.returncode is not None:  # a server that never answered keeps its uids
            for uid in self._uids:
                UIDS.give(uid)


_LINGERING: list[PairProcess] = []
_LINGER_LOCK = threading.Lock()


def reap_lingering(timeout: float = 0.0) -> None:
    """Release closed pair runs whose namespaces the server has since reported gone."""
    with _LINGER_LOCK:
        if not _LINGERING:
            return
        done = [p for p in _LINGERING if p.wait(timeout) is not None]
        for p in done:
            _LINGERING.remove(p)
    for p in done:
        p._release(0.0)


def _blobs(files: dict[str, bytes | str]) -> tuple[list[list[Any]], bytes]:
    data = [c.encode() if isinstance(c, str) else bytes(c) for c in files.values()]
    return [[n, len(b)] for n, b in zip(files, data, strict=True)], b"".join(data)


@contextlib.contextmanager
def handing_over(
    mine: list[int], theirs: Iterable[int], status: socket.socket, uids: list[int]
) -> Iterator[None]:
    """Around sending a run's fds to the server: the server's ends (``theirs``, read when the
    block ends) are closed here either way; on an error also our ends, the status socket, and
    the run's uids go back."""
    try:
        yield
    except BaseException:
        for fd in mine:
            os.close(fd)
        status.close()
        for uid in uids:
            UIDS.give(uid)
        raise
    finally:
        for fd in theirs:
            os.close(fd)


def start_pair(
    server: ForkServer,
    cand: dict[str, Any],
    tests: dict[str, Any],
    cand_files: dict[str, bytes | str],
    tests_files: dict[str, bytes | str],
    scratch_bytes: int,
) -> PairProcess:
    """Submit one pair run (``cand``/``tests``: argv, env, rlimits); return its handle."""
    reap_lingering()
    uids = [UIDS.take(), UIDS.take()]
    cmeta, cbody = _blobs(cand_files)
    tmeta, tbody = _blobs(tests_files)
    head = json.dumps(
        {
            "cand": {**cand, "uid": uids[0], "files": cmeta},
            "tests": {**tests, "uid": uids[1], "files": tmeta},
            "scratch_bytes": scratch_bytes,
        }
    ).encode()
    status, their_status = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    theirs: dict[str, int] = {"status": their_status.detach()}
    mine: list[int] = []
    with handing_over(mine, theirs.values(), status, uids):
        theirs["payload"] = os.memfd_create("sandbox-pair")
        with open(theirs["payload"], "wb", closefd=False) as fh:
            fh.write(struct.pack("<Q", len(head)) + head)
            fh.write(cbody)
            fh.write(tbody)
        for name in ("results", "stderr"):
            r, theirs[name] = os.pipe()
            mine.append(r)
        order = ("results", "stderr", "status", "payload")
        server.submit_fds(b"p", [theirs[k] for k in order])
    return PairProcess(mine[0], mine[1], status, uids)
