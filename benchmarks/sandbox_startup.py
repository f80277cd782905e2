"""Process-sandbox start-up: a fresh process makes the sandbox, verifies one solution, closes.

What ``tasksieve verify --solution`` spends beyond its imports, split in three phases, each
timed inside a fresh ``python`` process (so no warm server or cache of an earlier run helps,
except the per-boot probe records a user also keeps): ``make_sandbox("process")``, the first
verdict (``examples/solutions/add_good.py``, which also imports the code verifier and
registers its harness), and ``close()``. The imports before the first phase are not timed.
``--also DIR`` runs the same from another source tree (an older commit extracted with
``git archive``) in the same rounds, alternating which goes first, so both see the same load.
Prints median and fastest-round milliseconds per phase and the load before and after.

    .venv/bin/python -m benchmarks.sandbox_startup --rounds 15 [--also /tmp/old-tree]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

from benchmarks.timing import run_reported

ROOT = Path(__file__).resolve().parent.parent
PHASES = ("make_sandbox", "first verdict", "close", "total")
CHILD = """
import sys, time
from tasksieve.pipeline.commands.verify_inputs import load_task
from tasksieve.verifiers import make_sandbox
from tasksieve.verifiers.registry import VerifierCache
task = load_task("examples/solutions/add.task.json", None)
text = open("examples/solutions/add_good.py").read()
t0 = time.perf_counter()
sb = make_sandbox("process")
t1 = time.perf_counter()
cache = VerifierCache(sb)
v = cache.get("code").verify(task, text)
t2 = time.perf_counter()
cache.close()
sb.close()
t3 = time.perf_counter()
if v.status != "pass":
    sys.exit(f"verdict {v.status}: {v.detail}")
print(t1 - t0, t2 - t1, t3 - t2, t3 - t0)
"""


def once(tree: Path) -> list[float]:
    """The four phase times (seconds) of one fresh process run from ``tree``."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    argv = [sys.executable, "-c", CHILD]
    done = subprocess.run(argv, cwd=tree, env=env, capture_output=True, text=True, timeout=120)
    if done.returncode:
        raise SystemExit(f"{tree}: exit {done.returncode}\n{done.stderr[-2000:]}")
    return [float(x) for x in done.stdout.split()]


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--also", type=Path, help="another source tree, timed in the same rounds")
    args = ap.parse_args()
    trees = {"this tree": ROOT}
    if args.also:
        trees[args.also.name] = args.also.resolve()
    names = list(trees)
    for name in names:  # .pyc files and page cache, unmeasured
        once(trees[name])
    got: dict[str, list[list[float]]] = {n: [] for n in names}
    for r in range(args.rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            got[name].append(once(trees[name]))
    print(f"{args.rounds} alternating rounds; ms per phase: median (fastest round)")
    print(f"{'tree':14} " + " ".join(f"{p:>22}" for p in PHASES))
    for name in names:
        cols = list(zip(*got[name], strict=True))
        cells = [f"{1000 * statistics.median(c):10.1f} ({1000 * min(c):7.1f})" for c in cols]
        print(f"{name:14} " + " ".join(f"{c:>22}" for c in cells))


if __name__ == "__main__":
    sys.exit(run_reported(main))
