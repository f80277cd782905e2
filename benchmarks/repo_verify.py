"""Repo-task verification on our sandboxes vs a fresh container per verification (SWE-bench style).

``python -m benchmarks.repo_verify --modules 300 --n 20`` builds a repository of ``--modules``
small modules plus one test file (one bug, a reference patch fixing it), stores it, and times
``--n`` verifications of the reference in each setup (p50 and p99 in milliseconds):

- ours, process: ``RepoVerifier`` on the ``process`` sandbox, on the path its capabilities pick
  (a copy-on-write workspace over the stored snapshot where it opens workspaces, else the
  snapshot sent as input files), the host's pytest through the sandbox's site-packages,
- ours, docker: ``RepoVerifier`` on the ``docker`` sandbox, likewise (a workspace is one
  container per verification over an image of the snapshot; the image has no pytest, so the
  environment is built on the host once and mounted or sent),
- baseline, fresh container: the SWE-bench-style harness, one ``docker run --rm`` per
  verification with the snapshot and the environment mounted read-only, running the same
  guest program (copy, apply, restore, pytest).

Every verdict must be ``pass``. The docker setups are skipped, saying why, without an engine, the
image (``tasksieve sandbox build-image``) or a pip index to build the environment from.
"""

from __future__ import annotations

import argparse
import difflib
import json
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.timing import command_line, machine_line, run_reported
from tasksieve.schemas import TaskRecord
from tasksieve.verifiers.families.repo.environments import build
from tasksieve.verifiers.families.repo.snapshots import SnapshotStore
from tasksieve.verifiers.families.repo.verifier import GUEST_SOURCE, PLUGIN_SOURCE, RepoVerifier
from tasksieve.verifiers.sandbox.base import Sandbox

BUGGY = "def scale(x):\n    return x * 3\n"
FIXED = "def scale(x):\n    return x * 2\n"


def make_repo(root: Path, modules: int) -> tuple[Path, str]:
    """A package of ``modules`` modules and one test file; returns (tree, reference patch)."""
    pkg = root / "bench" / "pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    for i in range(modules):
        (pkg / f"m{i:04d}.py").write_text(f"VALUE = {i}\n\n\ndef get():\n    return VALUE\n")
    (pkg / "core.py").write_text(BUGGY)
    tests = root / "bench" / "tests"
    tests.mkdir()
    (tests / "test_core.py").write_text(
        "from pkg.core import scale\nfrom pkg.m0000 import get\n\n\n"
        "def test_scale():\n    assert scale(2) == 4\n\n\ndef test_get():\n    assert get() == 0\n"
    )
    patch = "".join(
        difflib.unified_diff(
            BUGGY.splitlines(True), FIXED.splitlines(True), "a/pkg/core.py", "b/pkg/core.py"
        )
    )
    return root / "bench", patch


def task_for(ref: str, patch: str) -> TaskRecord:
    return TaskRecord.model_validate(
        {
            "id": "bench/scale",
            "family": "repo",
            "prompt": "scale(x) must double x.",
            "reference_solution": patch,
            "verifier": {
                "family": "repo",
                "snapshot": ref,
                "fail_to_pass": ["tests/test_core.py::test_scale"],
                "pass_to_pass": ["tests/test_core.py::test_get"],
            },
        }
    )


def fresh_container(tree: Path, env: Path, task: TaskRecord, image: str) -> str:
    """One verification the SWE-bench way: a new container, the same guest, its verdict."""
    spec = task.verifier
    nonce = secrets.token_hex(8)
    job = {
        "mode": "packed",
        "work": "/tmp/work",
        "snap": "/snapshot",
        "links": {},
        "patch": task.reference_solution,
        "test_files": list(spec.test_files),  # type: ignore[union-attr]
        "ids": [*spec.fail_to_pass, *spec.pass_to_pass],  # type: ignore[union-attr]
        "test_args": [],
        "pythonpath": ["/env"],
        "plugin": PLUGIN_SOURCE,
        "timeout_s": 60,
        "memory_mb": 1024,
        "nonce": nonce,
        "python": "/usr/bin/python3",
    }
    argv = ["docker", "run", "--rm", "-i", "--network", "none", "--tmpfs", "/tmp:exec"]
    argv += ["-v", f"{tree}:/snapshot:ro", "-v", f"{env}:/env:ro", "-w", "/tmp", image]
    argv += ["/usr/bin/python3", "-I", "-S", "-c", GUEST_SOURCE]
    done = subprocess.run(argv, input=json.dumps(job).encode(), capture_output=True, check=False)
    for line in reversed(done.stdout.decode().splitlines()):
        if line.startswith(nonce + " "):
            result = json.loads(line[len(nonce) + 1 :])
            lines = [json.loads(x) for x in result.get("lines", [])]
            calls = {r["id"]: r["outcome"] for r in lines if r["phase"] == "call"}
            ok = len(calls) == 2 and set(calls.values()) == {"passed"} and result["exit"] == 0
            return "pass" if ok else "fail"
    return f"no report: {done.stderr.decode()[-300:]}"


def path_of(sandbox: Sandbox) -> str:
    """Which of the verifier's paths ``sandbox`` takes."""
    return "workspace path" if sandbox.capabilities.workspaces else "packed path"


def timed(fn: Callable[[], str], n: int) -> tuple[list[float], list[str]]:
    """Wall times (ms) and results of ``n`` calls, after one warm-up call."""
    fn()
    times, results = [], []
    for _ in range(n):
        t0 = time.perf_counter()
        results.append(fn())
        times.append((time.perf_counter() - t0) * 1000)
    return times, results


def p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100)[98] if len(values) >= 2 else values[0]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    ap.add_argument("--modules", type=int, default=300)
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--quick", action="store_true", help="30 modules, 2 verifications per setup")
    args = ap.parse_args(argv)
    if args.quick:
        args.modules, args.n = 30, 2
    print(command_line("benchmarks.repo_verify"))
    print("before:", machine_line())
    root = Path(tempfile.mkdtemp(prefix="repo-bench-"))
    tree, patch = make_repo(root, args.modules)
    store = SnapshotStore(root / "store")
    task = task_for(store.put(tree), patch)
    stored = store.path(task.verifier.snapshot)  # type: ignore[union-attr]
    rows: list[tuple[str, list[float]]] = []
    wrong = 0
    from tasksieve.verifiers.sandbox.process.sandbox import ProcessSandbox

    process = ProcessSandbox()
    ours = RepoVerifier(process, store)
    times, results = timed(lambda: ours.verify(task, patch).status, args.n)
    wrong += sum(r != "pass" for r in results)
    rows.append((f"ours, process sandbox ({path_of(process)})", times))
    process.close()
    try:
        from tasksieve.verifiers.sandbox.docker.sandbox import DockerSandbox

        docker = DockerSandbox(pool_size=2)
        env = build(task.verifier.environment, store.root)  # type: ignore[union-attr]
    except Exception as exc:  # no SDK, engine, image or index: say so and skip
        print(f"docker setups skipped: {type(exc).__name__}: {str(exc)[:200]}")
    else:
        ours_d = RepoVerifier(docker, store)
        times, results = timed(lambda: ours_d.verify(task, patch).status, args.n)
        wrong += sum(r != "pass" for r in results)
        rows.append((f"ours, docker sandbox ({path_of(docker)})", times))
        times, results = timed(lambda: fresh_container(stored, env, task, docker.image), args.n)
        wrong += sum(r != "pass" for r in results)
        rows.append(("baseline: fresh container per verification", times))
        docker.close()
    print(f"repository: {args.modules + 3} files; {args.n} verifications per setup")
    print("| setup | p50 ms | p99 ms |")
    print("|---|---|---|")
    for name, values in rows:
        print(f"| {name} | {statistics.median(values):.0f} | {p99(values):.0f} |")
    base = next((v for n, v in rows if n.startswith("baseline")), None)
    if base is not None:
        for name, values in rows[:-1]:
            ratio = statistics.median(base) / statistics.median(values)
            print(f"{name}: {ratio:.1f}x faster than the baseline at p50")
    print("after:", machine_line())
    if wrong:
        print(f"{wrong} verdicts were not pass")
        return 1
    print("every verdict was pass")
    return 0


if __name__ == "__main__":
    sys.exit(run_reported(lambda: main()))
