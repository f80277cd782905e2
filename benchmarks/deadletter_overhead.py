"""What the dead-letter guard costs: the Filter stage's DoFn plain against ``Guarded``, one run.

Both variants run the same ``FilterFn`` over the same ``--tasks`` scored tasks on the
in-memory DirectRunner, in alternating rounds (plain first in odd rounds, guarded first in
even ones). The figure is CPU seconds of this process per run (``time.process_time``, less
sensitive to other load than wall time), the median over ``--rounds``, and the ratio
guarded / plain. Filter is the cheapest stage per record, so the ratio is an upper bound on
the guard's share of a stage; the stages that run code in a sandbox spend far more per record.

    python -m benchmarks.deadletter_overhead --tasks 20000 --rounds 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions

from benchmarks.timing import command_line, machine_line, run_reported
from tasksieve.schemas import TaskRecord
from tasksieve.transforms.algorithms.stats import BandConfig
from tasksieve.transforms.filter import FilterFn
from tasksieve.transforms.runtime.common import REJECTED
from tasksieve.transforms.runtime.deadletter import Guarded
from tasksieve.transforms.runtime.items import Item, Scored


def scored(n: int) -> list[Scored]:
    """``n`` scored code tasks with pass rates spread over 0..4 of 4."""
    out = []
    for i in range(n):
        task = TaskRecord.model_validate(
            {
                "id": f"t{i}",
                "family": "code",
                "prompt": f"Write f{i}(x).",
                "verifier": {
                    "family": "code",
                    "style": "asserts",
                    "entry_point": f"f{i}",
                    "asserts": [f"assert f{i}(1) == 1"],
                },
                "reference_solution": f"def f{i}(x):\n    return x\n",
            }
        )
        out.append(Scored(Item(task, "in.jsonl", i + 1, "x"), 4, i % 5, "m", 4))
    return out


def plain(pcoll: beam.PCollection) -> beam.PCollection:
    step = beam.ParDo(FilterFn(BandConfig(), "bench", "fp")).with_outputs(REJECTED, main="ok")
    out = pcoll | "Band" >> step
    return (out["ok"], out[REJECTED]) | "All" >> beam.Flatten()


def guarded(pcoll: beam.PCollection) -> beam.PCollection:
    step = beam.ParDo(FilterFn(BandConfig(), "bench", "fp"))
    out = pcoll | "Band" >> Guarded(step, "filter", "bench")
    return (out["ok"], out[REJECTED]) | "All" >> beam.Flatten()


def one_run(data: list[Scored], stage: Callable[[beam.PCollection], beam.PCollection]) -> float:
    """CPU seconds of this process for one pipeline run over ``data``."""
    t0 = time.process_time()
    opts = PipelineOptions(["--direct_running_mode=in_memory"])
    with beam.Pipeline("DirectRunner", options=opts) as p:
        _ = stage(p | beam.Create(data)) | beam.combiners.Count.Globally()
    return time.process_time() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    data = scored(args.tasks)
    times: dict[str, list[float]] = {"plain": [], "guarded": []}
    for r in range(args.rounds):
        order = [("plain", plain), ("guarded", guarded)]
        for name, stage in order if r % 2 == 0 else order[::-1]:
            times[name].append(one_run(data, stage))
    print(f"# {command_line('benchmarks.deadletter_overhead')}")
    print(f"# {machine_line()}")
    med = {k: statistics.median(v) for k, v in times.items()}
    for name, ts in times.items():
        shown = ", ".join(f"{t:.2f}" for t in ts)
        print(f"{name:8} median {med[name]:.2f} CPU s for {args.tasks} tasks ({shown})")
    print(f"guarded / plain: {med['guarded'] / med['plain']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(run_reported(main))
