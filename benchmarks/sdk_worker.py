"""What a Beam SDK worker process costs when its first bundle runs Beam's inference DoFn.

``python -m benchmarks.sdk_worker --rounds 5`` runs one small pipeline (ints through
``RunInference`` with a handler that returns its batch, then a step that reports) on the
DirectRunner's multi-process mode with two SDK worker processes, in a fresh interpreter per
run, two ways in interleaved rounds:

- **plugin**: the options a curate run builds (``pipeline/curate/run.py``), which name
  ``transforms/runtime/beam_ml.py`` as a Beam plugin, so each worker imports it at start;
- **Beam's default** (the baseline): the same options without it, as before.

Each worker reports, when its first element leaves ``RunInference``, its peak resident memory
(``ru_maxrss``), the CPU time it has used, and whether torch is loaded. Nothing the workers
unpickle names a module of the project before Beam's inference DoFn (the handler is pickled
by value, the elements are ints): the case of a worker whose first bundle is the rollouts
stage. A worker whose first bundle was an earlier stage of the curate pipeline has already
imported the project's modules, and with them ``beam_ml``, either way.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from benchmarks.timing import run_reported

CHILD = textwrap.dedent(
    """
    import json, os, resource, sys, time
    import apache_beam as beam
    from apache_beam.options.pipeline_options import SetupOptions
    from tasksieve.pipeline.curate.config import CurateConfig
    from tasksieve.pipeline.curate.run import pipeline_options
    from tasksieve.transforms.runtime.beam_ml import ModelHandler, RunInference, PLUGIN

    class Echo(ModelHandler):
        def load_model(self):
            return None

        def run_inference(self, batch, model, inference_args=None):
            return list(batch)

    def report(x):
        return json.dumps({
            "pid": os.getpid(),
            "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "cpu_s": time.process_time(),
            "torch": "torch" in sys.modules,
            "inference_api": "apache_beam.ml.inference.base" in sys.modules,
        })

    out, way = sys.argv[1], sys.argv[2]
    args = ("--direct_running_mode=multi_processing", "--direct_num_workers=2")
    opts = pipeline_options(CurateConfig(inputs=("-",), output=out, beam_args=args))
    assert opts.view_as(SetupOptions).beam_plugins == [PLUGIN]
    if way == "default":  # the same options without the plugin, as before
        opts.view_as(SetupOptions).beam_plugins = None
    with beam.Pipeline(options=opts) as p:
        _ = (
            p
            | beam.Create(list(range(2)))
            | RunInference(Echo())
            | beam.Map(report)
            | beam.io.WriteToText(out + "/report", shard_name_template="")
        )
    """
)
WAYS = ("plugin", "default")


def run_once(way: str) -> list[dict[str, float]]:
    """One run in a fresh interpreter; each worker's first report (one per worker process)."""
    with tempfile.TemporaryDirectory(prefix="sdk-worker-") as tmp:
        proc = subprocess.run(
            [sys.executable, "-c", CHILD, tmp, way], capture_output=True, text=True, timeout=600
        )
        if proc.returncode != 0:
            raise SystemExit(f"{way}: exit {proc.returncode}\n{proc.stderr[-2000:]}")
        rows = [json.loads(line) for line in Path(tmp, "report").read_text().splitlines()]
    first: dict[int, dict[str, float]] = {}
    for row in sorted(rows, key=lambda r: r["cpu_s"]):
        first.setdefault(int(row["pid"]), row)
    return list(first.values())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    args = ap.parse_args()
    seen: dict[str, list[dict[str, float]]] = {w: [] for w in WAYS}
    for r in range(args.rounds):
        for way in WAYS if r % 2 == 0 else WAYS[::-1]:
            seen[way].extend(run_once(way))
    print(f"{args.rounds} interleaved rounds, medians over every worker process")
    print(f"{'way':<16} {'workers':>7} {'peak MB':>8} {'CPU s':>6} {'torch loaded':>13}")
    med = {}
    for way, rows in seen.items():
        med[way] = (
            statistics.median(r["peak_mb"] for r in rows),
            statistics.median(r["cpu_s"] for r in rows),
        )
        torch = sum(bool(r["torch"]) for r in rows)
        print(f"{way:<16} {len(rows):>7} {med[way][0]:>8.0f} {med[way][1]:>6.2f} {torch:>13}")
    (pm, pc), (dm, dc) = med["plugin"], med["default"]
    print(f"plugin / default: peak {pm / dm:.2f}x, CPU {pc / dc:.2f}x")


if __name__ == "__main__":
    sys.exit(run_reported(main))
