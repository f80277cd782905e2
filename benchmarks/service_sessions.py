"""Exec latency in a service session: packed per exec (before) against a live workspace (after).

Two ``tasksieve serve`` processes on loopback, the same backend (``process``), one with
``--session-mode packed`` (each exec is a fresh sandbox run: the session's files are packed in
and out) and one with ``--session-mode live`` (each exec is a command in the session's
persistent shell). In each, one session holding ``--files`` files of ``--file-bytes`` bytes
(an agent's small working set); then ``--execs`` execs of ``echo hi`` (a bash snippet), sent
one at a time, alternating between the servers over ``--rounds`` rounds. Measured: the HTTP
round trip of ``POST /sessions/{id}/exec`` as a client sees it, p50 and p99. Live execs are
measured twice: answering with the file list (the default, what the packed answer always
carried) and with ``list_files: false``. The ratios are packed p50 over each live p50, per
round, median over rounds.

    .venv/bin/python -m benchmarks.service_sessions --execs 200 --rounds 3
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

import httpx

from benchmarks.service_load import launch
from benchmarks.timing import overloaded, run_reported


def start(mode: str, port: int) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "tasksieve.pipeline.cli", "serve", "--insecure-no-auth"]
    argv += ["--port", str(port), "--workers", "2", "--session-mode", mode]
    return launch(argv, port, f"the {mode}")


def session(client: httpx.Client, files: int, size: int) -> str:
    sid = str(client.post("/sessions", json={}).raise_for_status().json()["session_id"])
    for i in range(files):
        client.put(f"/sessions/{sid}/files/src/f{i}.py", content=b"x" * size).raise_for_status()
    return sid


def execs(client: httpx.Client, sid: str, n: int, list_files: bool) -> list[float]:
    body = {"code": "echo hi", "language": "bash", "list_files": list_files}
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        got = client.post(f"/sessions/{sid}/exec", json=body).raise_for_status().json()
        out.append(time.perf_counter() - t0)
        if got["stdout"] != "hi\n":
            raise RuntimeError(f"wrong answer: {got}")
    return out


def pct(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] * 1000


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--execs", type=int, default=200)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--files", type=int, default=20)
    p.add_argument("--file-bytes", type=int, default=2000)
    args = p.parse_args(argv)
    from benchmarks.service_load import free_port

    ports = {"packed": free_port(), "live": free_port()}
    procs = {mode: start(mode, port) for mode, port in ports.items()}
    try:
        clients = {
            m: httpx.Client(base_url=f"http://127.0.0.1:{p}", timeout=60) for m, p in ports.items()
        }
        sids = {m: session(c, args.files, args.file_bytes) for m, c in clients.items()}
        for m in clients:  # warm both (first sandbox runs, first shell command)
            execs(clients[m], sids[m], 5, True)
        kinds = {
            "packed": ("packed", True),
            "live": ("live", True),
            "live, no list": ("live", False),
        }
        lat: dict[str, list[float]] = {k: [] for k in kinds}
        ratios: dict[str, list[float]] = {"live": [], "live, no list": []}
        for r in range(args.rounds):
            p50 = {}
            for kind, (mode, listed) in kinds.items():
                got = execs(clients[mode], sids[mode], args.execs, listed)
                lat[kind] += got
                p50[kind] = statistics.median(got)
            for kind, got_ratios in ratios.items():
                got_ratios.append(p50["packed"] / p50[kind])
            print(
                f"round {r + 1}: " + ", ".join(f"{k} p50 {v * 1000:.2f} ms" for k, v in p50.items())
            )
        print(
            f"session of {args.files} files x {args.file_bytes} B; {args.execs} execs x "
            f"{args.rounds} rounds per kind, one at a time"
        )
        for kind, values in lat.items():
            print(f"  {kind:14s} p50 {pct(values, 50):7.2f} ms  p99 {pct(values, 99):7.2f} ms")
        for kind, got_ratios in ratios.items():
            ratio = statistics.median(got_ratios)
            print(f"packed p50 / {kind} p50: {ratio:.1f}x (median over rounds)")
        if busy := overloaded():
            print(f"figures {busy}")
    finally:
        for proc in procs.values():
            proc.terminate()
            proc.wait(60)
    return 0


if __name__ == "__main__":
    sys.exit(run_reported(main))
