"""One small curate run on three runners, as ratios to the in-memory DirectRunner.

Runners: ``in-memory`` (the default DirectRunner mode, the baseline), ``multi-process``
(``--direct_running_mode=multi_processing --direct_num_workers=2``) and ``portable`` (the
PortableRunner against Beam's Python job service with an external worker pool: separate SDK
worker processes, ``tasksieve.pipeline.curate.local_portable``). Every run is a fresh ``python -m
pipeline.cli curate`` process (replay sampler, detectors off) on the same input; rounds are
interleaved in a rotated order so drift in machine load hits every runner alike; every round
checks that the runners kept and rejected the same counts per reason, and the
figure is the median wall time over the rounds. The job service and worker pool are started
once, before the rounds, and their start-up is printed apart (a cluster keeps them running).

    .venv/bin/python -m benchmarks.runners --rounds 3 [--input examples/tasks] [--samples 4]
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

from benchmarks.timing import rotated, run_reported
from tasksieve.pipeline.curate.local_portable import local_portable

ROOT = Path(__file__).resolve().parent.parent
REPLAY = ROOT / "examples" / "replay" / "completions.jsonl"
BASELINE = "in-memory"


def curate_argv(inputs: str, out: Path, samples: int, beam_args: list[str]) -> list[str]:
    """The curate command line for one timed run."""
    return [
        sys.executable,
        "-m",
        "tasksieve.pipeline.cli",
        "curate",
        "--input",
        inputs,
        "--output",
        str(out),
        "--overwrite",
        "--quiet",
        "--sampler",
        "replay",
        "--replay",
        str(REPLAY),
        "--samples",
        str(samples),
        "--no-weak-tests",
        "--no-ambiguity",
        "--no-cache",  # every round samples and verifies: a cached re-run would time nothing
        *beam_args,
    ]


def outcome(out: Path) -> tuple[object, object]:
    """What a run decided: its counts and rejections per reason (from its manifest)."""
    manifest = json.loads((out / "manifest.json").read_text())
    return manifest["counts"], manifest["rejected_by_reason"]


def timed(argv: list[str]) -> float:
    """Wall seconds of one run; a failed run stops the benchmark with its output."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    t0 = time.perf_counter()
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return wall


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--input", default=str(ROOT / "examples" / "tasks"))
    ap.add_argument("--samples", type=int, default=4)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    with local_portable() as endpoints, tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter() - t0
        runners = {
            BASELINE: [],
            "multi-process": ["--direct_running_mode=multi_processing", "--direct_num_workers=2"],
            "portable": endpoints.beam_args(),
        }
        walls: dict[str, list[float]] = {name: [] for name in runners}
        for r in range(args.rounds):
            for name in rotated(list(runners), r):
                out = Path(tmp) / name
                walls[name].append(timed(curate_argv(args.input, out, args.samples, runners[name])))
                print(f"round {r + 1} {name}: {walls[name][-1]:.1f} s", flush=True)
            decided = {name: outcome(Path(tmp) / name) for name in runners}
            if any(d != decided[BASELINE] for d in decided.values()):
                sys.exit(f"round {r + 1}: the runners decided differently: {decided}")
    base = statistics.median(walls[BASELINE])
    load = os.getloadavg()[0]
    print(f"\ninput {args.input}, {args.samples} samples, {args.rounds} rounds, load {load:.1f}")
    print(f"job service + worker pool start-up (once): {started:.1f} s")
    print(f"{'runner':<15} {'median s':>9} {'ratio':>7}")
    for name, ws in walls.items():
        med = statistics.median(ws)
        print(f"{name:<15} {med:>9.1f} {med / base:>7.2f}")


if __name__ == "__main__":
    sys.exit(run_reported(main))
