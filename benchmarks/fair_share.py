"""Fair share: what each curate stage costs alone and next to two CPU-bound busy processes.

The stage set is a curate run (``benchmarks.demo_costs``'s command, in a fresh child process,
fresh rollout cache) over a small subset of the examples: the first ``--per-family`` valid
tasks of each family file in ``examples/tasks`` plus the imported SWE-bench and Harbor records,
with the replay sampler by default (``--`` passes other curate flags, e.g. ``--sampler
transformers``). It runs ``--rounds`` times alone and ``--rounds`` times with two busy
processes beside it (``while True`` loops this script starts before and stops after each run;
each also ends by itself after ``--busy-limit`` seconds), alternating, and prints per stage
Beam's time (wall on the bundle thread) and the calling thread's CPU, the median of each, and
the ratio busy / alone. On a machine of C cores, two busy processes leave a single-threaded
stage at least C / (C + 2) of a core under a fair scheduler, so its wall time may grow by up
to (C + 2) / C (2x at 2 cores): a stage that more than doubles gets less than its fair share
(a pool sized by the core count that now waits on itself, a spin-wait, a timeout or poll
interval that grows with the load). CPU-seconds should barely move; a stage whose CPU grows
does more work under load (retries, timeouts hit).

The load average is printed before and after, and before each run alone; the goal is judged
on the latter (the busy processes themselves raise the load read after the runs): a machine
already loaded by others before an alone run has no quiet baseline, and the script says so.
The busy processes of one round leave the 1-minute load average above the cores for a minute
or so after they stop (it decays with a one-minute time constant), so before each alone run
the script waits, up to ``--settle`` seconds, for it to fall within the cores; and during each
alone run it adds up other processes' CPU (``benchmarks.others_cpu``: everything that is not
this script's own process tree or the run's ``cpuacct`` cgroup, which keeps a sandbox process
reparented to init), which must stay within a tenth of the cores for the goal to be judged.

Run: ``PYTHONPATH=. python -m benchmarks.fair_share [--rounds 1] [--per-family 2] [--json F]``
(``make demo-inputs`` first, for the imported repo tasks).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.demo_costs import GROUP_PREFIX, measure
from benchmarks.others_cpu import OthersCpu
from benchmarks.timing import MachineReport, cores

BUSY = "import time\nend = time.monotonic() + {limit}\nwhile time.monotonic() < end:\n    pass\n"


def subset(src: Path, dest: Path, per_family: int) -> int:
    """The first ``per_family`` valid records of each ``*.jsonl`` in ``src``, into ``dest``."""
    from tasksieve.schemas import TaskRecord

    n = 0
    for path in sorted(src.glob("*.jsonl")):
        picked = []
        for line in path.read_text().splitlines():
            try:
                TaskRecord.model_validate(json.loads(line))
            except ValueError:  # the examples hold deliberately bad records
                continue
            picked.append(line)
            if len(picked) == per_family:
                break
        if picked:
            (dest / path.name).write_text("\n".join(picked) + "\n")
            n += len(picked)
    return n


class Busy:
    """Two CPU-bound processes, started on entry and stopped on exit (or after ``limit`` s)."""

    def __init__(self, n: int, limit: float) -> None:
        self.n, self.limit = n, limit
        self.procs: list[subprocess.Popen[bytes]] = []

    def __enter__(self) -> Busy:
        code = BUSY.format(limit=self.limit)
        self.procs = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(self.n)]
        return self

    def __exit__(self, *exc: object) -> None:
        for p in self.procs:
            p.kill()
        for p in self.procs:
            p.wait()


def settle(cores: int, most_s: float, poll_s: float = 5.0) -> tuple[float, float]:
    """Wait until the 1-minute load average is within ``cores`` (at most ``most_s`` seconds);
    return the load then and the seconds waited."""
    start = time.monotonic()
    load = os.getloadavg()[0]
    while load > cores and time.monotonic() - start < most_s:
        time.sleep(poll_s)
        load = os.getloadavg()[0]
    return load, time.monotonic() - start


def per_stage(runs: list[dict[str, Any]], field: str) -> dict[str, float]:
    """The median of ``field`` (``stage_s`` or ``thread_cpu_s``) per stage over ``runs``."""
    names = {k for r in runs for k in r[field]}
    return {k: statistics.median(r[field].get(k, 0.0) for r in runs) for k in names}


def table(alone: list[dict[str, Any]], busy: list[dict[str, Any]]) -> tuple[str, float]:
    """Markdown: per stage, time and CPU alone and busy, and the ratios; the worst time ratio."""
    lines = [
        "| stage | Beam time alone, s | busy, s | ratio | thread CPU alone, s | busy, s | ratio |",
        "|---|---|---|---|---|---|---|",
    ]
    worst = 0.0
    t_a, t_b = per_stage(alone, "stage_s"), per_stage(busy, "stage_s")
    for stage in sorted(t_a, key=lambda s: -t_a[s]):
        if t_a[stage] < 0.2:  # too short to time apart from the runner's own jitter
            continue
        r = t_b.get(stage, 0.0) / t_a[stage]
        worst = max(worst, r)
        lines.append(f"| {stage} | {t_a[stage]:.1f} | {t_b.get(stage, 0.0):.1f} | {r:.2f} | | | |")
    c_a, c_b = per_stage(alone, "thread_cpu_s"), per_stage(busy, "thread_cpu_s")
    for fn in sorted(c_a, key=lambda s: -c_a[s]):
        if c_a[fn] < 0.1:
            continue
        r = c_b.get(fn, 0.0) / c_a[fn]
        lines.append(f"| {fn} (DoFn) | | | | {c_a[fn]:.2f} | {c_b.get(fn, 0.0):.2f} | {r:.2f} |")
    for label, runs in (("alone", alone), ("busy", busy)):
        wall = statistics.median(r["run_wall_s"] for r in runs)
        cpu = statistics.median(r["tree_cpu_s"] for r in runs)
        lines.append(f"\n{label}: whole run {wall:.1f} s wall, {cpu:.1f} CPU-s (process tree)")
    return "\n".join(lines), worst


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--demo-in", type=Path, default=Path("build/demo-inputs"))
    ap.add_argument("--per-family", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--busy", type=int, default=2, help="busy processes beside the run")
    ap.add_argument("--busy-limit", type=float, default=1800.0)
    ap.add_argument(
        "--settle",
        type=float,
        default=300.0,
        help="seconds to wait, at most, for the load to fall within the cores before an "
        "alone run (default 300)",
    )
    ap.add_argument("--json", type=Path)
    ap.add_argument("extra", nargs="*", help="more curate flags, after --")
    args = ap.parse_args(argv)
    if not (args.demo_in / "swebench.jsonl").exists():
        raise SystemExit(f"{args.demo_in}/swebench.jsonl is missing: run `make demo-inputs`")
    extra = args.extra or ["--sampler", "replay", "--replay", "examples/replay/completions.jsonl"]
    machine = MachineReport()
    machine.own_load = (
        "from this script's busy processes: the goal is judged by the load before each alone "
        "run and other processes' CPU during it (below)"
    )
    machine.start()
    alone: list[dict[str, Any]] = []
    busy: list[dict[str, Any]] = []
    before_alone: list[float] = []  # the busy processes raise the load read after the runs
    others_alone: list[float] = []  # other processes' cores busy during each alone run
    n_cores = cores()
    others_max = MachineReport.OTHERS_MAX * n_cores
    with tempfile.TemporaryDirectory(prefix="fair-share-") as tmp:
        tasks = Path(tmp) / "tasks"
        tasks.mkdir()
        n = subset(Path("examples/tasks"), tasks, args.per_family)
        print(f"{n} example tasks (+ the imported ones), {args.rounds} round(s)", flush=True)
        for r in range(args.rounds):
            out = Path(tmp) / f"out-{r}"
            load, waited = settle(n_cores, args.settle)
            if waited >= 1:
                print(f"waited {waited:.0f} s for the load to settle: {load:.2f}", flush=True)
            before_alone.append(load)
            with OthersCpu(own_cgroups=(f"/{GROUP_PREFIX}",)) as others:
                alone.append(measure(args.demo_in, out, extra, str(tasks)))
            others_alone.append(others.cores)
            print(f"others during the alone run: {others.cores:.3f} cores ({others.top()})")
            with Busy(args.busy, args.busy_limit):
                busy.append(measure(args.demo_in, out, extra, str(tasks)))
            print(
                f"round {r + 1}: alone {alone[-1]['run_wall_s']:.1f} s, next to "
                f"{args.busy} busy {busy[-1]['run_wall_s']:.1f} s",
                flush=True,
            )
    machine.finish()
    text, worst = table(alone, busy)
    print(text)
    print(f"worst stage: {worst:.2f}x next to {args.busy} busy processes on {n_cores} cores")
    peak = max(before_alone)
    print(f"load average before the 'alone' runs: {', '.join(f'{x:.2f}' for x in before_alone)}")
    print(f"other processes during them: {', '.join(f'{x:.3f}' for x in others_alone)} cores")
    if peak > n_cores:
        print(
            f"not judged: load {peak:.2f} > {n_cores} cores before an 'alone' run, so it was not "
            "alone"
        )
    elif max(others_alone) > others_max:
        print(
            f"not judged: other processes used {max(others_alone):.2f} cores during an 'alone' "
            f"run (more than {others_max:.1f}), so it was not alone"
        )
    else:
        print(f"goal no stage more than doubles: {'met' if worst <= 2.0 else 'not met'}")
    if args.json:
        args.json.write_text(json.dumps({"alone": alone, "busy": busy}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
