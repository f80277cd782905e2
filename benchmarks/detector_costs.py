"""What the gates and detectors cost per task, without and with the detector cache.

For every valid task of ``--input`` (default: the examples) this runs what a curate run runs
for it, with the same functions: the gates, test strength, the verification of its replay
samples (``--replay``, the first ``--samples``) and the ambiguity check on the passing ones.
Every sandbox entry (``run``, ``spawn``, ``spawn_pair``) is counted per stage and family, and
an entry identical to an earlier one of the same task (same files, command, limits, stdin) is
counted as a repeat: work done twice.

Three passes (after a start-up pass that measures the imports alone), each in a fresh child
process so that its CPU time (the child's and every
sandbox process it reaped, ``getrusage(RUSAGE_CHILDREN)``) is its own and does not depend on
what else the machine runs: ``off`` (no cache, what every run did before), ``cold`` (an empty
cache directory: the same work, plus writing the outcomes) and ``warm`` (the same directory
again: a re-run). Verdicts and reports must match across the three; the script says so.

Run: ``PYTHONPATH=. python -m benchmarks.detector_costs [--input DIR] [--json FILE]``.
The machine's load is printed before and after; figures taken above one busy process per core
are labelled as such.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.timing import machine_line

STAGES = ("gates", "test_strength", "verify", "ambiguity")
DETECTOR_STAGES = ("gates", "test_strength", "ambiguity")


def _tasks(inputs: Path) -> list[Any]:
    from tasksieve.schemas import TaskRecord

    out = []
    for path in sorted(inputs.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            try:
                out.append(TaskRecord.model_validate(json.loads(line)))
            except ValueError:  # the examples hold deliberately bad records
                continue
    return out


def _samples(replay: Path, k: int) -> dict[str, list[str]]:
    got: dict[str, list[str]] = collections.defaultdict(list)
    for line in replay.read_text().splitlines():
        row = json.loads(line)
        if len(got[row["task_id"]]) < k:
            got[row["task_id"]].append(row["completion"])
    return got


class Counter:
    """Counts a sandbox's entries per (stage, family) and the repeats per task."""

    def __init__(self) -> None:
        self.stage = "none"
        self.family = "none"
        self.entries: collections.Counter[str] = collections.Counter()
        self.repeats: collections.Counter[str] = collections.Counter()
        self.seen: set[str] = set()
        self.inside = threading.local()  # one entry is counted once, whatever it calls

    def task(self, family: str) -> None:
        self.family, self.seen = family, set()

    def wrap(self, sandbox: Any) -> None:
        for name in ("run", "spawn", "spawn_pair"):
            setattr(sandbox, name, self._counted(getattr(sandbox, name)))

    def _counted(self, fn: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            if getattr(self.inside, "depth", 0):  # a backend's run that starts with spawn
                return fn(*args, **kwargs)
            self.inside.depth = 1
            try:
                return self._count(fn, args, kwargs)
            finally:
                self.inside.depth = 0

        return call

    def _count(self, fn: Any, args: Any, kwargs: Any) -> Any:
        where = f"{self.stage}/{self.family}"
        self.entries[where] += 1
        blob = json.dumps([args, kwargs], sort_keys=True, default=repr)
        h = hashlib.sha256(blob.encode()).hexdigest()
        if h in self.seen:
            self.repeats[where] += 1
        self.seen.add(h)
        return fn(*args, **kwargs)


def child(mode: str, inputs: Path, replay: Path, k: int, cache_dir: str) -> dict[str, Any]:
    """One pass in this process: every task's outcomes and the counted entries."""
    from tasksieve.transforms.reliability import cached
    from tasksieve.transforms.reliability.gates import GatesConfig, cached_gates
    from tasksieve.transforms.rollouts.cache.detectors import DetectorCache
    from tasksieve.transforms.runtime.items import Item
    from tasksieve.transforms.samplers.extract import extract_solution
    from tasksieve.verifiers import SandboxConfig
    from tasksieve.verifiers.registry import VerifierCache, get_differ
    from tasksieve.verifiers.reliability import AmbiguityConfig, StrengthConfig
    from tasksieve.verifiers.reliability.records import report_to_json

    cfg = SandboxConfig()
    sandbox = cfg.make()
    counter = Counter()
    counter.wrap(sandbox)
    verifiers = VerifierCache(sandbox)
    cache = None if mode == "off" else DetectorCache(cache_dir, cfg)
    if cache is not None:
        cache.setup()
    gates_cfg, strength_cfg, amb_cfg = GatesConfig(), StrengthConfig(), AmbiguityConfig()
    samples = _samples(replay, k)
    outcomes: dict[str, Any] = {}
    t0 = time.monotonic()
    tasks = [] if mode == "startup" else _tasks(inputs)
    for task in tasks:
        counter.task(task.family)
        try:
            verifier = verifiers.get(task.family)
        except Exception as e:  # a family without a verifier here
            outcomes[task.id] = f"unsupported: {type(e).__name__}"
            continue
        try:
            differ = get_differ(task.family)
        except Exception:  # the pipeline passes such tasks through the detectors unmeasured
            differ = None
        counter.stage = "gates"
        _, reason = cached_gates(cache, Item(task, "bench", 1, "sha"), verifier, gates_cfg)
        row: dict[str, Any] = {"gates": reason}
        if not reason and differ is not None:
            counter.stage = "test_strength"
            rep = cached.strength(cache, task, verifier, differ, sandbox, strength_cfg)
            row["strength"] = _stable(report_to_json(rep))
            counter.stage = "verify"
            entry = getattr(task.verifier, "entry_point", None)
            sols = [extract_solution(c, task.family, entry) for c in samples.get(task.id, [])]
            passing = [(i, s) for i, s in enumerate(sols) if verifier.verify(task, s).passed]
            counter.stage = "ambiguity"
            amb = cached.ambiguity(cache, task, passing, differ, sandbox, amb_cfg)
            row["ambiguity"] = _stable(report_to_json(amb))
        outcomes[task.id] = row
    if cache is not None:
        cache.flush()
    verifiers.close()
    sandbox.close()
    return {
        "mode": mode,
        "tasks": len(tasks),
        "wall_s": time.monotonic() - t0,
        "entries": dict(counter.entries),
        "repeats": dict(counter.repeats),
        "outcomes": outcomes,
    }


def _stable(report: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in report.items() if k != "duration_s"}


def _pass(mode: str, args: argparse.Namespace, cache_dir: str) -> dict[str, Any]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    cmd = [sys.executable, "-m", "benchmarks.detector_costs", "--child", mode]
    cmd += [
        "--input",
        str(args.input),
        "--replay",
        str(args.replay),
        "--samples",
        str(args.samples),
    ]
    cmd += ["--cache-dir", cache_dir]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"pass {mode} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    out: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    out["cpu_s"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return out


def _total(entries: dict[str, int], stages: tuple[str, ...]) -> int:
    return sum(n for where, n in entries.items() if where.split("/")[0] in stages)


def report(passes: list[dict[str, Any]], startup: float) -> str:
    lines = []
    base = passes[0]
    n = base["tasks"]
    lines.append(
        f"{n} tasks; per task, gates + test strength + ambiguity (verify apart); CPU is the "
        f"pass's process tree less {startup:.2f} CPU-s of start-up (imports, sandbox up/down):"
    )
    for p in passes:
        p["task_cpu_s"] = max(0.0, p["cpu_s"] - startup)
        det = _total(p["entries"], DETECTOR_STAGES)
        rep = _total(p["repeats"], DETECTOR_STAGES)
        ver = _total(p["entries"], ("verify",))
        lines.append(
            f"  {p['mode']:5s} entries {det / n:6.2f}/task (repeats {rep / n:5.2f}), "
            f"verify {ver / n:5.2f}/task, CPU {p['task_cpu_s'] / n:6.3f} s/task "
            f"(whole pass {p['cpu_s']:7.2f} CPU-s, {p['wall_s']:6.1f} s wall)"
        )
    lines.append("  entries (repeats) per stage/family, one column per pass:")
    for where in sorted({w for p in passes for w in p["entries"]}):
        row = [f"{p['entries'].get(where, 0):5d} ({p['repeats'].get(where, 0):3d})" for p in passes]
        lines.append(f"  {where:26s} " + "  ".join(row))
    same = all(p["outcomes"] == base["outcomes"] for p in passes)
    lines.append(f"same gate reasons and reports in every pass: {same}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--input", type=Path, default=Path("examples/tasks"))
    ap.add_argument("--replay", type=Path, default=Path("examples/replay/completions.jsonl"))
    ap.add_argument("--samples", type=int, default=4)
    ap.add_argument("--modes", default="off,cold,warm")
    ap.add_argument("--json", type=Path, help="also write the passes here")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--cache-dir", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        out = child(args.child, args.input, args.replay, args.samples, args.cache_dir)
        print(json.dumps(out, sort_keys=True))
        return 0
    print(f"before: {machine_line()}")
    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="detector-costs-") as tmp:
        startup = _pass("startup", args, tmp)["cpu_s"]
        passes = [_pass(m, args, tmp) for m in args.modes.split(",")]
    load1 = os.getloadavg()[0]
    print(report(passes, startup))
    print(f"after: {machine_line()}")
    if max(load0, load1) > (os.cpu_count() or 1):
        print("the load exceeded the core count: these figures are not a quiet-machine result")
    if args.json:
        record = {"load": [load0, load1], "startup_cpu_s": startup, "passes": passes}
        args.json.write_text(json.dumps(record, indent=1, sort_keys=True))
    same = all(p["outcomes"] == passes[0]["outcomes"] for p in passes)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
