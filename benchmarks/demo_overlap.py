"""The demo's curate run with sampling on its own thread, against sampling on the bundle thread.

Each round runs the demo's curate command (``benchmarks.demo_costs``: a fresh child process,
a fresh output and rollout cache, the in-memory runner with Beam's stage timers) two ways, in
alternating order from round to round:

- **bundle** (the baseline, the path before): Beam's ``RunInference`` samples each batch on
  the bundle thread, so the stages fused before it (gates, test strength) wait for it;
- **ahead** (the pipeline's path now): ``transforms.rollouts.ahead`` samples each batch on a
  thread of its own while the bundle thread goes on.

It prints per run the wall time, the CPU of the whole process tree (a ``cpuacct`` cgroup as
root, else sampled), the cores kept busy and the Rollouts stage's Beam time; then the medians
per way, their ratios and whether the two ways wrote the same rows (``benchmarks.demo_rows``:
every field, or ``--decisions``). The load average and fork limit are printed before and
after.

Run: ``PYTHONPATH=. python -m benchmarks.demo_overlap --rounds 1 [--tasks DIR] [-- FLAGS]``
(``make demo-inputs`` first). ``--json F`` writes every figure. A goal is judged
by the load before the first run and the CPU other processes used during the runs (the runs
keep up to both cores busy themselves).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.demo_costs import AHEAD_ENV, GROUP_PREFIX, measure
from benchmarks.demo_rows import compare
from benchmarks.others_cpu import OthersCpu
from benchmarks.timing import MachineReport

WAYS = ("bundle", "ahead")
GOAL_S = 600.0  # issue 27: make demo within 10 minutes


def one(way: str, demo_in: Path | None, out: Path, tasks: str, extra: list[str]) -> dict[str, Any]:
    os.environ[AHEAD_ENV] = "0" if way == "bundle" else "1"
    try:
        run = measure(demo_in, out, extra, tasks)
    finally:
        os.environ.pop(AHEAD_ENV, None)
    if run["rc"] != 0:
        raise SystemExit(f"the {way} run failed (exit {run['rc']})")
    wall, cpu = run["run_wall_s"], run["tree_cpu_s"]
    rollouts = run["stage_s"].get("Rollouts", 0.0)
    print(
        f"  {way:6s} wall {wall:7.1f} s  tree CPU {cpu:7.1f} s ({run['cpu_source']})  "
        f"busy {cpu / wall:4.2f} cores  Rollouts stage {rollouts:6.1f} s",
        flush=True,
    )
    return {"way": way, **run}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--demo-in", type=Path, default=Path("build/demo-inputs"))
    ap.add_argument("--tasks", default="examples/tasks", help="the shipped tasks, or a subset")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument(
        "--first", choices=WAYS, default=WAYS[0], help="the way the first round runs first"
    )
    ap.add_argument("--decisions", action="store_true", help="compare kept/rejected only")
    ap.add_argument("--json", type=Path)
    ap.add_argument("extra", nargs="*", help="more curate flags, after --")
    args = ap.parse_args(argv)
    demo_in = args.demo_in if (args.demo_in / "swebench.jsonl").exists() else None
    if demo_in is None and args.tasks == "examples/tasks":
        raise SystemExit(f"{args.demo_in}/swebench.jsonl is missing: run `make demo-inputs`")
    machine = MachineReport().start()
    runs: list[dict[str, Any]] = []
    same: list[bool] = []
    with (
        tempfile.TemporaryDirectory(prefix="demo-overlap-") as tmp,
        OthersCpu(own_cgroups=(f"/{GROUP_PREFIX}",)) as others,
    ):
        machine.others = others  # the runs are their own load: judged by the others' CPU
        first = WAYS if args.first == WAYS[0] else WAYS[::-1]
        for r in range(args.rounds):
            order = first if r % 2 == 0 else first[::-1]
            print(f"round {r + 1}: {' then '.join(order)}", flush=True)
            outs = {}
            for way in order:
                outs[way] = Path(tmp) / f"{way}-{r}"
                runs.append(one(way, demo_in, outs[way], args.tasks, args.extra))
            diffs = compare(outs["bundle"], outs["ahead"], args.decisions)
            same.append(not diffs)
            what = "decisions" if args.decisions else "rows, every field"
            print(f"  same {what}: {'yes' if not diffs else 'NO'}", flush=True)
            for line in diffs[:10]:
                print(f"    {line}")
    machine.finish()
    med = {
        way: {
            key: statistics.median(x[key] for x in runs if x["way"] == way)
            for key in ("run_wall_s", "tree_cpu_s")
        }
        for way in WAYS
    }
    b, a = med["bundle"], med["ahead"]
    print(f"medians of {args.rounds} round(s):")
    for way in WAYS:
        m = med[way]
        print(f"  {way:6s} wall {m['run_wall_s']:7.1f} s  tree CPU {m['tree_cpu_s']:7.1f} s")
    print(
        f"ahead / bundle: wall {a['run_wall_s'] / b['run_wall_s']:.2f}x, "
        f"CPU {a['tree_cpu_s'] / b['tree_cpu_s']:.2f}x; same rows in {sum(same)} of {len(same)}"
    )
    if args.tasks == "examples/tasks" and not args.extra:
        machine.goal(
            "the demo's curate run, ahead, in minutes", a["run_wall_s"] / 60, GOAL_S / 60, False
        )
    if args.json:
        doc = {"runs": runs, "same": same, "load": [machine.before, machine.after]}
        args.json.write_text(json.dumps(doc, indent=1, sort_keys=True, default=str))
    return 0 if all(same) else 1


if __name__ == "__main__":
    sys.exit(main())
