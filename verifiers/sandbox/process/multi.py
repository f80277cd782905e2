"""The host's side of a multi-sample run: K candidates of one task and one tests process.

``start_multi`` sends the fork server an ``m`` request (see
``verifiers.sandbox.process.guest.multi`` for what runs inside and the isolation argument):
one namespace set, one tests process and one uid per sample plus one for the tests, for the
whole task. The returned ``MultiProcess`` is a ``PairProcess`` (results and the tests' stderr
pipes, the status socket, kill/close with the same uid bookkeeping) with one stderr reader per
sample. The host reads each sample's report from the results pipe; what the lines mean is the
caller's business (the code family's ``pair.judge_multi``).

``samples_cpu_s`` (once ``wait`` saw the end of a run that ended by itself: its tests process
exited) is each sample's CPU seconds as init measured it: the processes of the sample's uid,
reaped by init or by their parents, plus the tests process's CPU time between the end of the
sample before and the end of this one (read from ``/proc`` by init); None for a sample init
could not measure so, and for every sample of a run that was killed.
"""

from __future__ import annotations

import json
import os
import socket
import struct
from dataclasses import replace
from typing import Any

from tasksieve.verifiers.sandbox.base import Limits
from tasksieve.verifiers.sandbox.pipes import Reader
from tasksieve.verifiers.sandbox.process.forkserver import ForkServer
from tasksieve.verifiers.sandbox.process.pair import PairProcess, handing_over, reap_lingering
from tasksieve.verifiers.sandbox.process.runs import warm_job
from tasksieve.verifiers.sandbox.process.uids import UIDS

MAX_SAMPLES = 32  # fds per request stay well under the server's limit


class MultiProcess(PairProcess):
    """A started multi-sample run: ``results``, the tests' ``stderr``, ``sample_err[i]``."""

    def __init__(
        self, results: int, stderr: int, errs: list[int], status: socket.socket, uids: list[int]
    ) -> None:
        super().__init__(results, stderr, status, uids)
        self.sample_err: list[Reader] = [self.pump.add_reader(fd, 8192) for fd in errs]
        self._fds += errs
        self.samples_cpu_s: list[float | None] = [None] * len(errs)

    def _note(self, msg: dict[str, Any]) -> None:
        """Init's ``samples_cpu_s``, sent when the run ends by itself (not when killed)."""
        got = msg.get("samples_cpu_s")
        if isinstance(got, list) and len(got) == len(self.samples_cpu_s):
            self.samples_cpu_s = [
                float(c) if isinstance(c, (int, float)) and not isinstance(c, bool) else None
                for c in got
            ]


def _meta(files: dict[str, bytes | str]) -> tuple[list[list[Any]], bytes]:
    data = [c.encode() if isinstance(c, str) else bytes(c) for c in files.values()]
    return [[n, len(b)] for n, b in zip(files, data, strict=True)], b"".join(data)


def start_multi(
    server: ForkServer,
    shared: dict[str, bytes | str],
    cands: list[tuple[dict[str, Any], dict[str, bytes | str]]],
    tests: tuple[dict[str, Any], dict[str, bytes | str]],
    scratch_bytes: int,
) -> MultiProcess:
    """Submit one multi-sample run; ``cands``/``tests``: (job, files); ``shared``: files in
    /tmp every candidate reads. Each candidate job should carry ``wall_s``, its own limit."""
    if not 1 <= len(cands) <= MAX_SAMPLES:
        raise ValueError(f"a multi-sample run takes 1 to {MAX_SAMPLES} samples, got {len(cands)}")
    reap_lingering()
    uids = [UIDS.take() for _ in range(len(cands) + 1)]
    smeta, sbody = _meta(shared)
    metas = [_meta(files) for _, files in cands]
    tmeta, tbody = _meta(tests[1])
    head = json.dumps(
        {
            "shared": smeta,
            "cands": [
                {**job, "uid": uid, "files": m}
                for (job, _), uid, (m, _) in zip(cands, uids, metas, strict=False)
            ],
            "tests": {**tests[0], "uid": uids[-1], "files": tmeta},
            "scratch_bytes": scratch_bytes,
        }
    ).encode()
    status, their_status = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    theirs: list[int] = [their_status.detach()]
    mine: list[int] = []
    with handing_over(mine, theirs, status, uids):
        payload = os.memfd_create("sandbox-multi")
        theirs.append(payload)
        with open(payload, "wb", closefd=False) as fh:
            fh.write(struct.pack("<Q", len(head)) + head + sbody)
            for _, body in metas:
                fh.write(body)
            fh.write(tbody)
        ends: list[int] = []
        for _ in range(2 + len(cands)):  # results, the tests' stderr, one stderr per sample
            r, w = os.pipe()
            mine.append(r)
            theirs.append(w)
            ends.append(w)
        server.submit_fds(b"m", [ends[0], ends[1], theirs[0], payload, *ends[2:]])
    return MultiProcess(mine[0], mine[1], mine[2:], status, uids)


def spawn_multi(
    server: ForkServer,
    shared: dict[str, bytes | str],
    cands: list[tuple[dict[str, bytes | str], list[str], Limits]],
    tests: tuple[dict[str, bytes | str], list[str]],
) -> MultiProcess:
    """``start_multi`` from limits: each candidate keeps its own; the tests process gets the
    largest memory limit and the candidates' CPU seconds summed."""
    jobs = [({**warm_job(cmd, lim), "wall_s": lim.wall_s}, f) for f, cmd, lim in cands]
    most = max((lim for _, _, lim in cands), key=lambda lim: lim.memory_mb)
    summed = replace(most, cpu_s=sum(lim.cpu_s for _, _, lim in cands))
    scratch = max(lim.scratch_mb for _, _, lim in cands) * 1024 * 1024
    return start_multi(server, shared, jobs, (warm_job(tests[1], summed), tests[0]), scratch)
