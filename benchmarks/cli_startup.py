"""CLI start-up: wall time of each subcommand against a bare ``import pyarrow, pydantic``.

Every command runs as a fresh ``python`` process from this checkout (``-m tasksieve.pipeline.cli``,
what the ``tasksieve`` script runs). Rounds are interleaved (each round runs every command
once, in a rotated order) so drift in machine load hits all commands alike; the figure is
the median over the rounds. The floor is ``python -c "import pyarrow, pydantic"`` measured
in the same rounds; the goal is ``validate`` and ``verify`` within 0.3 s of it. ``verify``
also starts the process sandbox and runs the solution: the "verify imports" row
(``import pipeline.commands.verify_run`` alone) separates the import cost from the sandbox's. CPU
seconds (user + system of the process and the children it waited for) are printed beside the
wall time: on a busy machine they move much less than wall time does; so does the fastest
round's wall time (``min s``), the closest a busy machine comes to a quiet one. Children run
with ``PYTHONDONTWRITEBYTECODE`` unset, so the warm-up run leaves ``.pyc`` files as an install
would. ``--also DIR`` adds the validate and verify rows run from another source tree (e.g. an
older commit extracted with ``git archive``), in the same rounds.

    .venv/bin/python -m benchmarks.cli_startup --rounds 15 [--also /tmp/old-tree]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.timing import run_reported, verdict

ROOT = Path(__file__).resolve().parent.parent
SOL = ROOT / "examples" / "solutions"
TASK, GOOD = str(SOL / "add.task.json"), str(SOL / "add_good.py")
GOAL_S = 0.3

# name -> (argv after the interpreter, exit statuses that count as a normal run, source tree)
COMMANDS: dict[str, tuple[list[str], set[int], Path]] = {
    "floor: import pyarrow, pydantic": (["-c", "import pyarrow, pydantic"], {0}, ROOT),
    "tasksieve --version": (["-m", "tasksieve.pipeline.cli", "--version"], {0}, ROOT),
    "tasksieve validate examples/tasks": (
        ["-m", "tasksieve.pipeline.cli", "validate", "examples/tasks"],
        {1},  # examples/tasks/problems.jsonl is invalid on purpose
        ROOT,
    ),
    "verify imports (no run)": (["-c", "import tasksieve.pipeline.commands.verify_run"], {0}, ROOT),
    "tasksieve verify add_good.py": (
        ["-m", "tasksieve.pipeline.cli", "verify", "--task", TASK, "--solution", GOOD],
        {0},
        ROOT,
    ),
}
FLOOR = "floor: import pyarrow, pydantic"
GOALS = ("tasksieve validate examples/tasks", "tasksieve verify add_good.py")

Sample = tuple[float, float]  # wall seconds, CPU seconds


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def time_once(argv: list[str], ok: set[int], tree: Path) -> Sample:
    """Wall and CPU seconds of one run; exit if it ends with an unexpected status."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # use .pyc files, as an installed package does
    cpu, start = _cpu(), time.perf_counter()
    proc = subprocess.run(
        [sys.executable, *argv], cwd=tree, env=env, capture_output=True, timeout=300
    )
    wall, cpu = time.perf_counter() - start, _cpu() - cpu
    if proc.returncode not in ok:
        raise SystemExit(f"{argv}: exit {proc.returncode}\n{proc.stderr.decode()[-2000:]}")
    return wall, cpu


def measure(rounds: int) -> dict[str, list[Sample]]:
    """Every command once per round, the order rotated each round, after one warm-up run."""
    names = list(COMMANDS)
    samples: dict[str, list[Sample]] = {n: [] for n in names}
    for name in names:  # page cache and .pyc files, unmeasured
        time_once(*COMMANDS[name])
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            samples[name].append(time_once(*COMMANDS[name]))
    return samples


def report(samples: dict[str, list[Sample]]) -> str:
    wall = {n: statistics.median(s[0] for s in ss) for n, ss in samples.items()}
    cpu = {n: statistics.median(s[1] for s in ss) for n, ss in samples.items()}
    floor, cpu_floor = wall[FLOOR], cpu[FLOOR]
    low = {n: min(s[0] for s in ss) for n, ss in samples.items()}
    lines = [
        f"{'command':36} {'wall s':>7} {'- floor':>8} {'x floor':>8} {'cpu s':>7} {'- floor':>8}"
        f" {'min s':>7} {'- floor':>8}"
    ]
    for n in samples:
        lines.append(
            f"{n:36} {wall[n]:7.3f} {wall[n] - floor:+8.3f} {wall[n] / floor:8.2f}"
            f" {cpu[n]:7.3f} {cpu[n] - cpu_floor:+8.3f} {low[n]:7.3f} {low[n] - low[FLOOR]:+8.3f}"
        )
    for n in GOALS:
        over = wall[n] - floor
        said = verdict(over, GOAL_S, higher=False)  # not judged above the core count
        lines.append(f"goal: {n} within {GOAL_S} s of the floor: {said} ({over:+.3f} s)")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15, help="interleaved rounds (default 15)")
    ap.add_argument("--also", type=Path, help="another source tree to time validate/verify from")
    args = ap.parse_args()
    if args.also:
        for name in GOALS:
            argv, ok, _ = COMMANDS[name]
            COMMANDS[f"{name.split()[1]} [{args.also.name}]"] = (argv, ok, args.also.resolve())
    samples = measure(args.rounds)
    print(f"{args.rounds} interleaved rounds, medians, {os.cpu_count()} CPUs")
    print(report(samples))


if __name__ == "__main__":
    sys.exit(run_reported(main))
