"""What ``make demo``'s curate run costs, stage by stage: CPU-seconds and sandbox entries.

The run is the demo's own command line (``tasksieve curate`` over ``examples/tasks`` and the
imported SWE-bench and Harbor records, ``--samples 4``, the default sampler), in a fresh child
process, on the in-memory runner kept by ``benchmarks.scale_runner`` so that Beam's own
per-transform timers can be read afterwards. The output and its rollout cache go to a fresh
temporary directory: every run is a first run (no cached rollout, verdict or detector outcome).

What it prints:

- per top-level stage, Beam's execution time (start, process and finish bundle, sampled on
  the bundle thread: wall time, waiting on the sandbox included), the sandbox entries the
  stage made (``run``, ``spawn``, ``spawn_pair``, ``open_workspace`` and each run inside a
  workspace; attributed by the caller on the stack: ``run_gates`` -> Gates,
  ``measure_strength`` -> TestStrength, ``measure_ambiguity`` -> Ambiguity, else the
  ``tasksieve.transforms`` package that called), the wall time spent inside them, and the
  sandbox processes' CPU split in proportion to that time;
- per tasksieve DoFn class, the CPU of its calling thread (``time.thread_time`` around
  ``process``, each step of what it yields, and ``finish_bundle``); threads a DoFn starts
  (a thread pool, torch's intra-op threads) are not in it.

The process tree's CPU (child and every descendant, each counted once) is printed as the total;
CPU is what a busy machine stretches least, so it is the figure to compare between machines
and loads. The load average is printed before and after.

Run: ``PYTHONPATH=. python -m benchmarks.demo_costs [--demo-in build/demo-inputs] [--json F]``
(``make demo-inputs`` first). ``--keep DIR`` keeps the run's output for ``benchmarks.demo_rows``.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import functools
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.timing import MachineReport

STAGE_OF_FUNCTION = {
    "run_gates": "Gates",
    "measure_strength": "TestStrength",
    "measure_ambiguity": "Ambiguity",
}
PACKAGE_STAGE = {"rollouts": "Verify"}
"""Stage names of the ``tasksieve.transforms`` packages whose entries carry no detector frame
(the rollouts package's entries are the Verify stage's: sampling enters no sandbox)."""
ENTRY_METHODS = ("run", "spawn", "spawn_pair", "open_workspace")
AHEAD_ENV = "DEMO_COSTS_AHEAD"
"""``0`` in the child's environment: sample on the bundle thread (Beam's ``RunInference``)."""


def demo_argv(
    demo_in: Path | None, out: Path, extra: list[str], tasks: str = "examples/tasks"
) -> list[str]:
    """The Makefile's ``demo`` curate command, writing into ``out`` (``tasks``: the shipped
    tasks' directory, or a smaller set of them; ``demo_in`` None: without the imported ones)."""
    inputs = [tasks]
    if demo_in is not None:
        inputs += [str(demo_in / "swebench.jsonl"), str(demo_in / "harbor.jsonl")]
        extra = ["--snapshot-store", str(demo_in / "snapshots"), *extra]
    head = ["curate", "--input", *inputs, "--output", str(out), "--overwrite"]
    return [*head, "--samples", "4", *extra]


class Meter:
    """Sandbox entries and their CPU per stage, from wrapped sandbox objects."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.entries: collections.Counter[str] = collections.Counter()
        self.entry_wall: collections.defaultdict[str, float] = collections.defaultdict(float)
        self.inside = threading.local()

    def stage(self, depth: int = 2) -> str:
        """The stage that made the current call: from the stack, else the stage that handed
        the call to this pool thread."""
        f = sys._getframe(depth)
        module_stage = ""
        while f is not None:
            name = f.f_code.co_name
            if name in STAGE_OF_FUNCTION:
                return STAGE_OF_FUNCTION[name]
            mod = str(f.f_globals.get("__name__", ""))
            if not module_stage and mod.startswith("tasksieve.transforms."):
                package = mod.split(".")[2]
                module_stage = PACKAGE_STAGE.get(package, package)
            f = f.f_back  # type: ignore[assignment]
        return module_stage or getattr(self.inside, "stage", None) or "other"

    def carry_into_pools(self) -> None:
        """A call submitted to a thread pool counts for the stage that submitted it."""
        from concurrent.futures import ThreadPoolExecutor

        submit, meter = ThreadPoolExecutor.submit, self

        def carried(pool: Any, fn: Any, /, *a: Any, **k: Any) -> Any:
            stage = meter.stage(1)

            def run(*a2: Any, **k2: Any) -> Any:
                meter.inside.stage = stage
                try:
                    return fn(*a2, **k2)
                finally:
                    meter.inside.stage = None

            return submit(pool, run, *a, **k)

        ThreadPoolExecutor.submit = carried  # type: ignore[method-assign]

    def wrap(self, obj: Any) -> Any:
        for name in ENTRY_METHODS:
            fn = getattr(obj, name, None)
            if fn is not None:
                setattr(obj, name, self._counted(fn, name == "open_workspace"))
        return obj

    def _counted(self, fn: Any, workspace: bool) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            if getattr(self.inside, "depth", 0):  # a backend's run that starts with spawn
                return fn(*args, **kwargs)
            where = self.stage()
            self.inside.depth = 1
            t0 = time.perf_counter()
            try:
                got = fn(*args, **kwargs)
            finally:
                self.inside.depth = 0
                with self.lock:
                    self.entries[where] += 1
                    self.entry_wall[where] += time.perf_counter() - t0
            if workspace:
                self.wrap(got)
            return got

        return call


class StepClock:
    """The calling thread's CPU per DoFn class (``time.thread_time`` around ``process``, each
    step of what it yields, and ``finish_bundle``) for every DoFn defined in tasksieve."""

    def __init__(self) -> None:
        self.cpu: collections.defaultdict[str, float] = collections.defaultdict(float)

    def install(self) -> None:
        import apache_beam as beam

        import tasksieve.pipeline.curate.build  # noqa: F401  (every stage's DoFn defined)

        todo, seen = list(beam.DoFn.__subclasses__()), set()
        while todo:
            cls = todo.pop()
            if cls in seen:
                continue
            seen.add(cls)
            todo.extend(cls.__subclasses__())
            if not cls.__module__.startswith("tasksieve."):
                continue
            for name in ("process", "finish_bundle"):
                if name in cls.__dict__:
                    setattr(cls, name, self._timed(cls.__dict__[name], cls.__name__))

    def _timed(self, fn: Any, key: str) -> Any:
        clock = self

        @functools.wraps(fn)
        def timed(*a: Any, **k: Any) -> Any:
            t0 = time.thread_time()
            try:
                got = fn(*a, **k)
            finally:
                clock.cpu[key] += time.thread_time() - t0
            if got is None or isinstance(got, (list, tuple)):
                return got
            return clock._steps(iter(got), key)

        return timed

    def _steps(self, it: Any, key: str) -> Any:
        while True:
            t0 = time.thread_time()
            try:
                item = next(it)
            except StopIteration:
                self.cpu[key] += time.thread_time() - t0
                return
            self.cpu[key] += time.thread_time() - t0
            yield item


def child(argv: list[str], result_file: str) -> None:
    """Run the demo's curate once in this process, counting; write the figures as JSON."""
    from benchmarks.scale_runner import TIMED_RUNNER, TimedRunner, stage_seconds
    from tasksieve.pipeline.cli import main
    from tasksieve.verifiers.sandbox.config import SandboxConfig

    if os.environ.get(AHEAD_ENV) == "0":  # benchmarks.demo_overlap's baseline
        from tasksieve.transforms.rollouts import ahead

        ahead.AHEAD = False
    group = os.environ.get("DEMO_COSTS_CGROUP")
    if group:  # every process started from here on is counted there
        (Path(group) / "cgroup.procs").write_text(str(os.getpid()))
    meter, clock = Meter(), StepClock()
    clock.install()
    meter.carry_into_pools()
    make = SandboxConfig.make

    def counted_make(self: SandboxConfig) -> Any:
        return meter.wrap(make(self))

    SandboxConfig.make = counted_make  # type: ignore[method-assign]
    t0 = time.perf_counter()
    rc = main([*argv, "--runner", TIMED_RUNNER, "--quiet"])
    wall = time.perf_counter() - t0
    me = resource.getrusage(resource.RUSAGE_SELF)
    Path(result_file).write_text(
        json.dumps(
            {
                "rc": rc,
                "self_cpu_s": me.ru_utime + me.ru_stime,
                "wall_s": wall,
                "stage_s": stage_seconds(TimedRunner.results[-1]) if TimedRunner.results else {},
                "thread_cpu_s": dict(clock.cpu),
                "entries": dict(meter.entries),
                "entry_wall_s": dict(meter.entry_wall),
            }
        )
    )


CPUACCT = Path("/sys/fs/cgroup/cpuacct")
GROUP_PREFIX = "demo-costs-"  # the name of every run's group starts with it


def cpu_group() -> Path | None:
    """A fresh cgroup v1 ``cpuacct`` group to run the child in (root), else None.

    The fork server reaps its runs without passing their CPU up (``getrusage`` of the tree
    misses them, and most runs end between two samples); a cgroup counts every process that
    ever ran in it, reaped or not."""
    try:
        path = CPUACCT / f"{GROUP_PREFIX}{os.getpid()}-{time.monotonic_ns()}"
        path.mkdir()
        return path
    except OSError:
        return None


def run_tree(cmd: list[str]) -> dict[str, Any]:
    """Run ``cmd``; its wall time and the CPU of its whole process tree: from a ``cpuacct``
    cgroup where one can be made, else sampled (``cpu_source`` says which)."""
    import psutil

    from benchmarks.scale import tree_cpu

    group = cpu_group()
    t0 = time.perf_counter()
    env = dict(os.environ)
    if group is not None:
        env["DEMO_COSTS_CGROUP"] = str(group)
    proc = subprocess.Popen(cmd, env=env)
    root = psutil.Process(proc.pid)
    own, seen, alive = 0.0, {}, set[int]()
    while proc.poll() is None:
        try:
            tree = [root, *root.children(recursive=True)]
            t = root.cpu_times()
            own = t.user + t.system
        except psutil.Error:
            continue
        alive = set()
        for p in tree[1:]:
            try:  # a short run may be gone between the listing and its reading
                t, ppid = p.cpu_times(), p.ppid()
            except psutil.Error:
                continue
            seen[p.pid] = (ppid, t.user + t.system + t.children_user + t.children_system)
            alive.add(p.pid)
        time.sleep(0.2)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"the demo run failed (exit {proc.returncode}): {' '.join(cmd)}")
    below = tree_cpu(seen, alive, proc.pid)
    if group is not None:
        total = int((group / "cpuacct.usage").read_text()) / 1e9
        with contextlib.suppress(OSError):
            group.rmdir()
        return {
            "tree_cpu_s": total,
            "own_cpu_s": own,
            "sandbox_cpu_s": max(0.0, total - own),
            "run_wall_s": wall,
            "cpu_source": "cgroup",
        }
    return {
        "cpu_source": "sampled",
        "tree_cpu_s": own + below,
        "own_cpu_s": own,
        "sandbox_cpu_s": below,
        "run_wall_s": wall,
    }


def measure(
    demo_in: Path | None, out: Path, extra: list[str], tasks: str = "examples/tasks"
) -> dict[str, Any]:
    """One demo run in a child process: the child's figures plus its tree CPU."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as fh:
        result_file = fh.name
    cache = tempfile.mkdtemp(prefix="demo-costs-cache-")  # a first run: nothing cached
    argv = demo_argv(demo_in, out, ["--rollout-cache", cache, *extra], tasks)
    cmd = [sys.executable, "-m", "benchmarks.demo_costs", "--child", result_file, "--", *argv]
    tree = run_tree(cmd)
    got: dict[str, Any] = json.loads(Path(result_file).read_text())
    if tree.get("cpu_source") == "cgroup":  # the curate process's own CPU, exactly
        tree["own_cpu_s"] = got["self_cpu_s"]
        tree["sandbox_cpu_s"] = max(0.0, tree["tree_cpu_s"] - got["self_cpu_s"])
    os.unlink(result_file)
    shutil.rmtree(cache, ignore_errors=True)
    return {**got, **tree, "argv": argv}


def report(run: dict[str, Any]) -> str:
    """The per-stage tables as Markdown."""
    stage_s, entries, inside = run["stage_s"], run["entries"], run["entry_wall_s"]
    in_sandbox = sum(inside.values()) or 1.0
    stages = sorted(set(stage_s) | set(entries), key=lambda s: -stage_s.get(s, 0.0))
    lines = [
        "| stage | Beam time, s | sandbox entries | time in sandbox, s | sandbox CPU-s (share) |",
        "|---|---|---|---|---|",
    ]
    for s in stages:
        if stage_s.get(s, 0.0) < 0.05 and not entries.get(s):
            continue
        share = run["sandbox_cpu_s"] * inside.get(s, 0.0) / in_sandbox
        lines.append(
            f"| {s} | {stage_s.get(s, 0.0):.1f} | {entries.get(s, 0)} | "
            f"{inside.get(s, 0.0):.1f} | {share:.1f} |"
        )
    lines += ["", "| DoFn (tasksieve) | CPU-s on the calling thread |", "|---|---|"]
    for name, cpu in sorted(run["thread_cpu_s"].items(), key=lambda kv: -kv[1]):
        if cpu >= 0.05:
            lines.append(f"| {name} | {cpu:.1f} |")
    on_threads = sum(run["thread_cpu_s"].values())
    lines.append(
        f"\nwhole run: {run['run_wall_s']:.1f} s wall, {run['tree_cpu_s']:.1f} CPU-s "
        f"(process tree): {run['own_cpu_s']:.1f} in the curate process ({on_threads:.1f} of "
        f"them inside tasksieve DoFns on their calling thread, the rest imports, Beam, "
        f"other threads), {run['sandbox_cpu_s']:.1f} below it (sandbox processes, split by "
        f"time in sandbox above); {sum(entries.values())} sandbox entries"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--demo-in", type=Path, default=Path("build/demo-inputs"))
    ap.add_argument("--tasks", default="examples/tasks", help="the shipped tasks, or a subset")
    ap.add_argument("--keep", type=Path, help="write the run's output here (for demo_rows)")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("extra", nargs="*", help="more curate flags, after --")
    args = ap.parse_args(argv)
    if args.child:
        child(args.extra, args.child)
        return 0
    if not (args.demo_in / "swebench.jsonl").exists():
        raise SystemExit(f"{args.demo_in}/swebench.jsonl is missing: run `make demo-inputs`")
    machine = MachineReport().start()
    with tempfile.TemporaryDirectory(prefix="demo-costs-") as tmp:
        out = args.keep or Path(tmp) / "out"
        run = measure(args.demo_in, out, args.extra, args.tasks)
    machine.finish()
    print(report(run))
    if args.json:
        run["load"] = [machine.before, machine.after]
        args.json.write_text(json.dumps(run, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
