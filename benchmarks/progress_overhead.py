"""What live progress costs: the Filter stage with no progress channel against one, one run.

Both variants run the same ``FilterFn`` (through ``Guarded``, as curate runs it) over the same
``--tasks`` scored tasks on the in-memory DirectRunner, in alternating rounds. Every task makes
two counts (``filter.kept`` or a rejection's reason, plus ``rejected@filter``), each also
reported to the channel when one is set. The figure is CPU seconds of this process per run
(``time.process_time``: the runner, the stage and the channel's timer thread), the median over
``--rounds``, and the ratio channel / none. Filter is the cheapest stage per record, so the
ratio is an upper bound on the channel's share of a stage. The channel's lines written per run
are printed too (batched: about one per ``INTERVAL_S``, not one per count).

    python -m benchmarks.progress_overhead --tasks 20000 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile

from benchmarks.deadletter_overhead import guarded, one_run, scored
from benchmarks.timing import command_line, machine_line, run_reported
from tasksieve.transforms.runtime import progress
from tasksieve.transforms.runtime.items import Scored


def run_with_channel(data: list[Scored], lines: list[tuple[int, int]]) -> float:
    """CPU seconds of one run reporting to a fresh channel; appends (lines, counts) it got."""
    directory = tempfile.mkdtemp(prefix="progress-bench-")
    os.environ[progress.ENV] = directory
    try:
        took = one_run(data, guarded)
        progress.flush()
        got = []
        for name in os.listdir(directory):
            with open(os.path.join(directory, name), "rb") as f:
                got += [json.loads(line)["c"] for line in f.read().splitlines()]
        lines.append((len(got), sum(sum(c.values()) for c in got)))
        return took
    finally:
        del os.environ[progress.ENV]
        shutil.rmtree(directory, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    os.environ.pop(progress.ENV, None)
    data = scored(args.tasks)
    times: dict[str, list[float]] = {"none": [], "channel": []}
    lines: list[tuple[int, int]] = []
    for r in range(args.rounds):
        order = ["none", "channel"] if r % 2 == 0 else ["channel", "none"]
        for name in order:
            if name == "none":
                times[name].append(one_run(data, guarded))
            else:
                times[name].append(run_with_channel(data, lines))
    print(f"# {command_line('benchmarks.progress_overhead')}")
    print(f"# {machine_line()}")
    med = {k: statistics.median(v) for k, v in times.items()}
    for name, ts in times.items():
        shown = ", ".join(f"{t:.2f}" for t in ts)
        print(f"{name:8} median {med[name]:.2f} CPU s for {args.tasks} tasks ({shown})")
    shown = ", ".join(f"{n} lines carrying {c} counts" for n, c in lines)
    print(f"channel writes per run: {shown}")
    print(f"channel / none: {med['channel'] / med['none']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(run_reported(main))
