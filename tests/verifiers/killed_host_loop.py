"""Stress loop: kill a host at a random moment while it starts cold runs; count leftovers.

``python -m tests.verifiers.killed_host_loop --rounds 30 [--kind per-run|unshare]``

Each round starts a host process that starts ``SPIN_WITH_CHILDREN`` runs of one sandbox kind
back to back, SIGKILLs it 0.05 to 0.6 s later, and waits up to 10 s for every process carrying
the round's marker to be gone. A round that leaves some prints each survivor's pid, parent
and namespace pid; the survivors are then killed. Exits 1 if any round left something.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import subprocess
import sys
from pathlib import Path

from tests.verifiers.reclaim_util import KINDS, REPO, cleanup, marker, survivors

HOST = """
import sys
from tasksieve.verifiers.sandbox.base import Limits
from tasksieve.verifiers.sandbox.process.sandbox import ProcessSandbox
from tests.verifiers.reclaim_util import KINDS, SPIN_WITH_CHILDREN, command
mark, kind = sys.argv[1], sys.argv[2]
limits = Limits(wall_s=600, cpu_s=600, max_processes=16)
sb = ProcessSandbox(**KINDS[kind])
runs = []
print("ready", flush=True)
while True:
    runs.append(sb.spawn({}, command(sb, SPIN_WITH_CHILDREN, mark), limits))
"""


def describe(pid: int) -> str:
    """``pid``'s parent and namespace pids, from /proc."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return f"{pid}: gone"
    fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
    return f"{pid}: ppid {fields.get('PPid')} nspid {fields.get('NSpid', '').split()}"


def one_round(kind: str, rng: random.Random) -> list[int]:
    """The marked processes a host killed mid-start left behind after 10 s."""
    mark = marker()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    host = subprocess.Popen(
        [sys.executable, "-c", HOST, mark, kind], stdout=subprocess.PIPE, env=env, cwd="/"
    )
    try:
        assert host.stdout is not None and host.stdout.readline() == b"ready\n"
        with contextlib.suppress(subprocess.TimeoutExpired):
            host.wait(rng.uniform(0.05, 0.6))
    finally:
        host.kill()
        host.wait(30.0)
    left = survivors(mark, 10.0)
    for pid in left:
        print("  ", describe(pid))
    cleanup([mark])
    return left


def main() -> int:
    """Run the rounds; 1 if any left something."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--kind", choices=sorted(KINDS), default="per-run")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    bad = 0
    for i in range(args.rounds):
        left = one_round(args.kind, rng)
        bad += bool(left)
        print(f"round {i}: {len(left)} left", flush=True)
    print(f"{bad} of {args.rounds} rounds left processes behind")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
