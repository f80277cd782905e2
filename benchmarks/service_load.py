"""The sandbox service under load, against in-process verification of the same work.

Workload: the reference solution and the empty solution of every code, sql and config
example task (a mix of pass and fail), cycled to ``--requests`` verifications per pass.
Baseline: a warm in-process ``VerifierCache`` over the same backend (``process``), the same
work on a pool of ``--workers`` threads. Service: one ``tasksieve serve --workers N`` on
loopback, the same work sent through ``tasksieve.verifiers.remote.ServiceClient`` (``POST /verify``)
by 1, N, 2N and 4N client threads. Baseline and service passes alternate over
``--rounds``; figures are medians: throughput (verifications/s) and p50/p99 latency, with
each service level's throughput as a ratio of the baseline's (the median over rounds of the
ratio to the same round's baseline pass; "at saturation": the best level with at least as
many client threads as workers). Verdict statuses must match
the baseline's (a mismatch aborts).

Then failover: two servers, each journaling every keyed job it finishes; ``2N`` client
threads send ``--failover-requests`` verifications over both URLs while one server is
killed (SIGKILL, or ``--kill-signal TERM`` for a drain) and restarted on its port. Counted:
requests lost (no answer after the client's retries); requests re-run after the kill (a key the
killed server had journaled, so run, but not answered, run again once elsewhere: servers do not
share idempotency keys, see docs/service.md); and requests run twice otherwise (any other key
in the journals more than once: an idempotency fault). Loopback only; bounded by
``--requests`` and ``--max-seconds``. Exits 1 on a lost request or one run twice otherwise.

    .venv/bin/python -m benchmarks.service_load --workers 2 --requests 60 --rounds 2
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

from benchmarks.timing import run_reported

ROOT = Path(__file__).resolve().parent.parent
TASKS = ROOT / "examples" / "tasks"
FAMILIES = ("code", "sql", "config")


@dataclass(frozen=True)
class Result:
    rate: float
    p50_ms: float
    p99_ms: float
    statuses: list[str]


def workload(n: int) -> list[tuple[dict, str]]:
    """``n`` (task JSON, solution) pairs: each task's reference and empty solution, cycled."""
    pairs: list[tuple[dict, str]] = []
    for family in FAMILIES:
        for line in (TASKS / f"{family}.jsonl").read_text().splitlines():
            if line.strip():
                task = json.loads(line)
                pairs += [(task, task["reference_solution"]), (task, "")]
    return [pairs[i % len(pairs)] for i in range(n)]


def timed(fn, items: list, threads: int) -> Result:
    """Run ``fn`` over ``items`` on ``threads`` threads; rate and latency percentiles."""
    lat: list[float] = [0.0] * len(items)

    def one(i: int) -> str:
        t0 = time.perf_counter()
        status = fn(items[i])
        lat[i] = time.perf_counter() - t0
        return status

    t0 = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        statuses = list(pool.map(one, range(len(items))))
    wall = time.perf_counter() - t0
    q = statistics.quantiles(lat, n=100, method="inclusive")
    return Result(len(items) / wall, q[49] * 1000, q[98] * 1000, statuses)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(port: int, workers: int, journal: Path | None = None) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "tasksieve.pipeline.cli", "serve", "--insecure-no-auth"]
    argv += ["--port", str(port), "--workers", str(workers), "--max-queue", "1024"]
    if journal is not None:
        argv += ["--journal", str(journal)]
    return launch(argv, port, "the")


def launch(argv: list[str], port: int, what: str) -> subprocess.Popen[bytes]:
    """Start the server ``argv`` (this checkout first on the path); wait for its /healthz."""
    import httpx

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(600):
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return proc
        except httpx.TransportError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"{what} server did not start")


def stop(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> None:
    if proc.poll() is None:
        proc.send_signal(sig)
        proc.wait(60)


def run_counts(journals: list[Path], killed_lines: int) -> tuple[int, int]:
    """(re-run after the kill, run twice otherwise) from the servers' journals, where the first
    ``killed_lines`` lines of ``journals[0]`` are the killed server's."""
    runs: dict[str, list[bool]] = {}  # key -> for each run, whether the killed server ran it
    for n, j in enumerate(journals):
        lines = j.read_text().splitlines() if j.exists() else []
        for i, line in enumerate(lines):
            try:
                key = json.loads(line)["key"]
            except (ValueError, KeyError, TypeError):  # a line the SIGKILL cut short
                continue
            runs.setdefault(key, []).append(n == 0 and i < killed_lines)
    rerun = sum(1 for r in runs.values() if len(r) == 2 and r.count(True) == 1)
    twice = sum(1 for r in runs.values() if len(r) > 1) - rerun
    return rerun, twice


def failover(
    workers: int, requests: int, kill_signal: int, work: Path
) -> tuple[int, int, int, int]:
    """(answered, lost, re-run after the kill, run twice otherwise) with one of two servers
    killed and restarted mid-load (see the module doc)."""
    from tasksieve.verifiers.remote import SERVICE_RETRY, RemoteError, ServiceClient

    ports = [free_port(), free_port()]
    journals = [work / "journal-a.jsonl", work / "journal-b.jsonl"]
    procs = [start(p, workers, j) for p, j in zip(ports, journals, strict=True)]
    urls = tuple(f"http://127.0.0.1:{p}" for p in ports)
    client = ServiceClient(urls, policy=replace(SERVICE_RETRY, max_attempts=30))
    items = workload(requests)
    done = Counter[str]()
    lock = threading.Lock()
    killed_lines = [0]

    def one(i: int) -> None:
        task, solution = items[i]
        try:
            client.post("/verify", {"task": task, "solution": solution}, key=f"req-{i}")
            outcome = "answered"
        except RemoteError:
            outcome = "lost"
        with lock:
            done[outcome] += 1

    def chaos() -> None:
        while sum(done.values()) < requests // 4:
            time.sleep(0.05)
        stop(procs[0], kill_signal)
        if journals[0].exists():  # all written by the killed server: the new one is not up
            killed_lines[0] = len(journals[0].read_text().splitlines())
        time.sleep(1.0)
        procs[0] = start(ports[0], workers, journals[0])

    killer = threading.Thread(target=chaos)
    killer.start()
    with ThreadPoolExecutor(2 * workers) as pool:
        list(pool.map(one, range(requests)))
    killer.join()
    for p in procs:
        stop(p)
    client.close()
    return done["answered"], done["lost"], *run_counts(journals, killed_lines[0])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2, help="sandbox threads on both sides")
    ap.add_argument("--requests", type=int, default=60, help="verifications per pass")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--failover-requests", type=int, default=120)
    ap.add_argument("--kill-signal", choices=["KILL", "TERM"], default="KILL")
    ap.add_argument("--max-seconds", type=float, default=600.0, help="stop adding rounds after")
    args = ap.parse_args(argv)
    if not 1 <= args.requests <= 5000 or not 1 <= args.workers <= 64:
        ap.error("need 1 <= --requests <= 5000 and 1 <= --workers <= 64")

    from tasksieve.schemas import TaskRecord
    from tasksieve.verifiers.registry import VerifierCache
    from tasksieve.verifiers.remote import ServiceClient
    from tasksieve.verifiers.sandbox.process.sandbox import ProcessSandbox

    items = workload(args.requests)
    records = {t["id"]: TaskRecord.model_validate(t) for t, _ in items}
    sandbox = ProcessSandbox()
    cache = VerifierCache(sandbox)

    def local(item: tuple[dict, str]) -> str:
        task = records[item[0]["id"]]
        return cache.get(task.family).verify(task, item[1]).status

    port = free_port()
    server = start(port, args.workers)
    client = ServiceClient((f"http://127.0.0.1:{port}",))

    def remote(item: tuple[dict, str]) -> str:
        answer = client.post("/verify", {"task": item[0], "solution": item[1]})
        return str(answer["status"])

    levels = sorted({1, args.workers, 2 * args.workers, 4 * args.workers})
    base: list[Result] = []
    svc: dict[int, list[Result]] = {c: [] for c in levels}
    timed(local, items, args.workers)  # warm both sides: every task seen once by each cache
    timed(remote, items, args.workers)
    t_start = time.monotonic()
    for r in range(args.rounds):
        if r and time.monotonic() - t_start > args.max_seconds:
            break
        base.append(timed(local, items, args.workers))
        for c in levels:
            svc[c].append(timed(remote, items, c))
            if svc[c][-1].statuses != base[-1].statuses:
                print(f"verdicts differ at concurrency {c}", file=sys.stderr)
                return 1
    stop(server)
    client.close()
    cache.close()
    sandbox.close()

    def med(results: list[Result], attr: str) -> float:
        return statistics.median(getattr(x, attr) for x in results)

    b_rate = med(base, "rate")
    print(
        f"service load: {len(items)} verifications per pass, {len(base)} rounds, workers "
        f"{args.workers} on both sides, load average {os.getloadavg()[0]:.2f}"
    )
    print(f"{'side':<24}{'verif/s':>9}{'p50 ms':>9}{'p99 ms':>9}{'ratio':>8}")
    print(
        f"{'in-process':<24}{b_rate:9.2f}{med(base, 'p50_ms'):9.1f}{med(base, 'p99_ms'):9.1f}"
        f"{1.0:8.2f}"
    )
    best = 0.0
    for c in levels:
        rate = med(svc[c], "rate")
        # paired: each service pass against the baseline pass of its own round (drift cancels)
        ratio = statistics.median(s.rate / b.rate for s, b in zip(svc[c], base, strict=True))
        if c >= args.workers:
            best = max(best, ratio)
        name = f"service, {c} client thr."
        print(
            f"{name:<24}{rate:9.2f}{med(svc[c], 'p50_ms'):9.1f}{med(svc[c], 'p99_ms'):9.1f}"
            f"{ratio:8.2f}"
        )
    print(f"at saturation the service reaches {best:.2f} of in-process throughput")
    statuses = Counter(base[-1].statuses)
    print("verdicts (each pass): " + ", ".join(f"{k} {v}" for k, v in sorted(statuses.items())))

    sig = signal.SIGKILL if args.kill_signal == "KILL" else signal.SIGTERM
    with tempfile.TemporaryDirectory() as work:
        answered, lost, rerun, twice = failover(
            args.workers, args.failover_requests, sig, Path(work)
        )
    print(
        f"failover (SIG{args.kill_signal} one of 2 servers, restarted): {answered} answered, "
        f"{lost} lost, {twice} run twice, {rerun} re-run after the kill"
    )
    return 0 if lost == 0 and twice == 0 else 1


if __name__ == "__main__":
    sys.exit(run_reported(main))
