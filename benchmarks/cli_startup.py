"""CLI start-up: wall time of each subcommand against a bare ``import pyarrow, pydantic``.

Every command runs as a fresh ``python`` process from this checkout (``-m
tasksieve.pipeline.cli``, what the ``tasksieve`` script runs). Rounds are interleaved (each
round runs every command once, in a rotated order) so drift in machine load hits all commands
alike; the figure is the median over the rounds. The floor is ``python -c "import pyarrow,
pydantic"`` measured in the same rounds; the goal is ``validate`` and ``verify`` within 0.3 s
of it. ``verify`` also starts the process sandbox and runs the solution: the "verify imports"
row (``import pipeline.commands.verify_run`` alone) separates the import cost from the
sandbox's; "curate imports" (``import pipeline.curate.run``) is what every curate run and every
Airflow task that builds the pipeline pays before its first stage. CPU seconds (user + system
of the process and the children it waited for) are printed beside the wall time, and so is the
process's peak resident memory: on a busy machine CPU moves much less than wall time does; so
does the fastest round's wall time (``min s``), the closest a busy machine comes to a quiet
one. Children run with ``PYTHONDONTWRITEBYTECODE`` unset, so the warm-up run leaves ``.pyc``
files as an install would. ``--also DIR`` adds the validate, verify and curate-imports rows run
from another source tree (e.g. an older commit extracted with ``git archive``), in the same
rounds.

    .venv/bin/python -m benchmarks.cli_startup --rounds 15 [--also /tmp/old-tree]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
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
    "curate imports (no run)": (["-c", "import tasksieve.pipeline.curate.run"], {0}, ROOT),
    "tasksieve verify add_good.py": (
        ["-m", "tasksieve.pipeline.cli", "verify", "--task", TASK, "--solution", GOOD],
        {0},
        ROOT,
    ),
}
FLOOR = "floor: import pyarrow, pydantic"
GOALS = ("tasksieve validate examples/tasks", "tasksieve verify add_good.py")
# the rows --also runs from the other tree too, with the short name it prints them under
ALSO = {GOALS[0]: "validate", GOALS[1]: "verify", "curate imports (no run)": "curate imports"}

Sample = tuple[float, float, float]  # wall seconds, CPU seconds, peak resident MB


def time_once(argv: list[str], ok: set[int], tree: Path) -> Sample:
    """Wall and CPU seconds and peak memory of one run; exit on an unexpected status.

    The peak is the child's ``ru_maxrss``. Linux starts a forked child's count at the
    parent's resident size and keeps it across ``exec``, so it never reads below this
    process's own peak (``own_peak_mb``, about 20 MB for this script).
    """
    env = {**os.environ, "PYTHONPATH": str(tree)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # use .pyc files, as an installed package does
    with tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, *argv], cwd=tree, env=env, stdout=subprocess.DEVNULL, stderr=err
        )
        killer = threading.Timer(300, proc.kill)
        killer.start()
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own usage, its children's too
        wall = time.perf_counter() - start
        killer.cancel()
        proc.returncode = code = os.waitstatus_to_exitcode(status)
        if code not in ok:
            err.seek(0)
            raise SystemExit(f"{argv}: exit {code}\n{err.read().decode()[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def own_peak_mb() -> float:
    """This process's peak resident MB: the lowest peak a child of it can show."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


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
    rss = {n: statistics.median(s[2] for s in ss) for n, ss in samples.items()}
    lines = [
        f"{'command':36} {'wall s':>7} {'- floor':>8} {'x floor':>8} {'cpu s':>7} {'- floor':>8}"
        f" {'min s':>7} {'- floor':>8} {'peak MB':>8}"
    ]
    for n in samples:
        lines.append(
            f"{n:36} {wall[n]:7.3f} {wall[n] - floor:+8.3f} {wall[n] / floor:8.2f}"
            f" {cpu[n]:7.3f} {cpu[n] - cpu_floor:+8.3f} {low[n]:7.3f} {low[n] - low[FLOOR]:+8.3f}"
            f" {rss[n]:8.0f}"
        )
    lines.append(f"(peak MB reads no lower than this process's own, {own_peak_mb():.0f} MB)")
    for n in GOALS:
        over = wall[n] - floor
        said = verdict(over, GOAL_S, higher=False)  # not judged above the core count
        lines.append(f"goal: {n} within {GOAL_S} s of the floor: {said} ({over:+.3f} s)")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15, help="interleaved rounds (default 15)")
    ap.add_argument("--also", type=Path, help="another source tree to time the same rows from")
    args = ap.parse_args()
    if args.also:
        for name, short in ALSO.items():
            argv, ok, _ = COMMANDS[name]
            COMMANDS[f"{short} [{args.also.name}]"] = (argv, ok, args.also.resolve())
    samples = measure(args.rounds)
    print(f"{args.rounds} interleaved rounds, medians, {os.cpu_count()} CPUs")
    print(report(samples))


if __name__ == "__main__":
    sys.exit(run_reported(main))
