"""Agent episodes: steps per second and CPU per episode, ours vs ``docker exec``, 1 to 64 at once.

A scripted agent (no model) runs the same six actions on a shipped repo task
(``benchmarks.agent_steps``: list, search, read, apply the reference patch, parse, count) in
each setup, at each level of concurrent episodes (``--levels``, default 1, 8, 64; each level
runs ``max(level, --episodes)`` episodes, ``level`` at a time):

- ``process``: ``transforms.agent.driver.run_episodes`` over the process backend's live
  workspaces (bubblewrap, an overlay over the snapshot, one guest agent and shell per session),
- ``docker``: the same driver over the docker backend's workspaces (one container per session,
  commands over its attached stream),
- ``docker exec`` (the baseline): per episode ``docker run -d`` of a container whose image holds
  the repository, one ``docker exec`` per action and one for the diff, ``docker rm -f``.

Every setup's wall time includes opening and closing its sessions or containers. CPU is this
run's own, per episode and per step: this process and every descendant it reaped, plus the
Docker daemons (``agent_steps.run_cpu_seconds``), plus, for the process backend, the CPU of each
session's processes read just before it closes (``Metered``; also shown alone as the sandbox CPU
per episode), less what those reads cost this process (``Metered.meter_s``). Not counted: the
other work on the machine, and the processes inside containers (so the docker figures are lower
bounds); a reaped bubblewrap may carry part of its session's CPU, counted twice (so the process
figures are upper bounds).
``--model-share`` adds the share of an episode's wall time spent in the sandbox vs waiting for
the model (``benchmarks.agent_model``). Every run checks that each action exited 0 and each
episode's diff shows the patched file; a wrong one makes the exit status 1.

    python -m benchmarks.agent_episodes                 # 1, 8, 64 episodes; three setups
    python -m benchmarks.agent_episodes --quick         # 1 and 4; a minute or so
    python -m benchmarks.agent_episodes --setups process --before REV   # now vs REV

``--before REV`` adds ``process before``: the process setup of git revision ``REV`` of this
checkout (exported with ``git archive``; this checkout's benchmark files are copied in, so the
workload and the meter are the same). Both it and this checkout's ``process`` rows then run in
child processes alike, one level at a time, now then before, so that both see the same machine;
the summary prints now / before for steps per second and CPU per step at each level.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from benchmarks.agent_steps import DockerExec, Metered, Ours, Run, load_task, timed_level
from benchmarks.timing import command_line, goal, machine_line, others_watched, run_reported
from tasksieve.verifiers.registry import make_sandbox
from tasksieve.verifiers.sandbox.base import Sandbox, SandboxUnavailable

Go = Callable[[int, int], list[str]]


def measure(
    name: str,
    go: Go,
    levels: list[int],
    floor: int,
    meter: Metered | None = None,
) -> list[Run]:
    """One warm-up episode, then each level; a row per level."""
    problems = go(1, 1)
    if problems:
        print(f"  {name}: warm-up episode went wrong: {problems[0]}")
    runs = []
    for level in levels:
        episodes = max(level, floor)
        inside0 = meter.sandbox_s if meter is not None else 0.0
        scans0 = meter.meter_s if meter is not None else 0.0
        wall, cpu, problems = timed_level(go, episodes, level)
        inside = meter.sandbox_s - inside0 if meter is not None else None
        cpu += (inside or 0.0) - (meter.meter_s - scans0 if meter is not None else 0.0)
        steps = episodes * STEPS
        run = Run(name, level, episodes, steps, wall, cpu, problems, inside)
        runs.append(run)
        box = f"{inside / episodes:.3f}" if inside is not None else "not counted"
        print(
            f"| {name} | {level} | {episodes} | {run.steps_per_s:.1f} | "
            f"{run.cpu_per_episode:.3f} | {run.cpu_ms_per_step:.1f} | {box} | "
            f"{len(problems)} |",
            flush=True,
        )
        for p in problems[:3]:
            print(f"    wrong: {p}")
    return runs


STEPS = 6
ROW = re.compile(r"^\| process \| (\d+) \| (\d+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \| "
                 r"([\d.]+|not counted) \| (\d+) \|$", re.M)  # fmt: skip


BENCH_FILES = ("agent_steps.py", "agent_episodes.py", "agent_profile.py", "timing.py")


def export_revision(rev: str, dest: Path) -> Path:
    """The files of git revision ``rev`` of this checkout under ``dest`` (``git archive``),
    with this checkout's copies of the agent benchmarks (``BENCH_FILES``)."""
    repo = Path(__file__).resolve().parents[1]
    tar = subprocess.run(["git", "-C", str(repo), "archive", "--format=tar", rev],
                         capture_output=True, check=True).stdout  # fmt: skip
    out = dest / "before"
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run(["tar", "-x", "-C", str(out)], input=tar, check=True)
    for name in BENCH_FILES:  # the same workload and meter; only the code under test differs
        shutil.copy(repo / "benchmarks" / name, out / "benchmarks" / name)
    return out


def child_go(root: Path, floor: int, name: str) -> Callable[[int], Run]:
    """One level of the process setup run by the checkout at ``root`` in a child process (its
    own warm-up), as a row named ``name``."""

    def level_run(level: int) -> Run:
        cmd = [sys.executable, "-m", "benchmarks.agent_episodes", "--setups", "process",
               "--levels", str(level), "--episodes", str(floor)]  # fmt: skip
        env = {**os.environ, "PYTHONPATH": str(root)}
        done = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True,
                              timeout=1800)  # fmt: skip
        rows = [m for m in ROW.finditer(done.stdout) if int(m.group(1)) == level]
        if not rows:
            raise RuntimeError(f"the before run printed no row for {level}: {done.stdout[-600:]}"
                               f"{done.stderr[-600:]}")  # fmt: skip
        m = rows[-1]
        eps, rate, cpu_ep = int(m.group(2)), float(m.group(3)), float(m.group(4))
        box = None if m.group(6) == "not counted" else float(m.group(6)) * eps
        problems = [f"{m.group(7)} wrong episodes"] if int(m.group(7)) else []
        run = Run(name, level, eps, eps * STEPS, eps * STEPS / rate, cpu_ep * eps,
                  problems, box)  # fmt: skip
        print(f"| {name} | {level} | {eps} | {rate:.1f} | {cpu_ep:.3f} | "
              f"{run.cpu_ms_per_step:.1f} | {m.group(6)} | {m.group(7)} |", flush=True)  # fmt: skip
        return run

    return level_run


def ours_go(sandbox: Sandbox) -> tuple[Ours, Go]:
    """Our episodes over ``sandbox`` (metered where it is the process backend)."""
    ours = Ours(sandbox, load_task())

    def go(episodes: int, level: int) -> list[str]:
        return ours.problems(ours.run(episodes, level))

    return ours, go


def summary(runs: dict[str, list[Run]], levels: list[int]) -> None:
    base = {r.level: r for r in runs.get("docker exec", [])}
    then = {r.level: r for r in runs.get("process before", [])}
    for r in runs.get("process", []):
        b = then.get(r.level)
        if b is not None:
            print(
                f"process now / before at {r.level} at once: steps/s "
                f"{r.steps_per_s / b.steps_per_s:.2f}x, CPU per step {r.cpu_ms_per_step:.1f} "
                f"vs {b.cpu_ms_per_step:.1f} ms ({r.cpu_ms_per_step / b.cpu_ms_per_step:.2f})"
            )
    for name, rows in runs.items():
        if name in ("docker exec", "process before"):
            continue
        for r in rows:
            b = base.get(r.level)
            if b is not None:
                print(
                    f"{name} at {r.level} at once: {r.steps_per_s / b.steps_per_s:.1f}x the "
                    f"docker exec steps/s; CPU per step {r.cpu_ms_per_step:.1f} ms vs "
                    f"{b.cpu_ms_per_step:.1f} ms"
                )
        first, last = rows[0], rows[-1]
        print(
            f"{name}: CPU per step at {last.level} / at {first.level} = "
            f"{last.cpu_ms_per_step / first.cpu_ms_per_step:.2f}"
        )
    top = max(levels)
    if "process" in runs and top in base:
        r = next(x for x in runs["process"] if x.level == top)
        goal(f"process steps/s vs docker exec at {top}", r.steps_per_s / base[top].steps_per_s, 10)
        flat = r.cpu_ms_per_step / runs["process"][0].cpu_ms_per_step
        goal(f"process CPU per step at {top} / at {levels[0]}", flat, 1.25, higher=False)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--levels", default="1,8,64", help="concurrent episodes, comma-separated")
    ap.add_argument("--episodes", type=int, default=4, help="least episodes per level")
    ap.add_argument("--setups", default="process,docker,docker exec")
    ap.add_argument("--quick", action="store_true", help="levels 1 and 4, 2 episodes at least")
    ap.add_argument("--model-share", action="store_true", help="also sandbox vs model time")
    ap.add_argument("--before", metavar="REV", help="also the process setup of git REV")
    a = ap.parse_args(argv)
    levels = [1, 4] if a.quick else [int(x) for x in a.levels.split(",")]
    floor = 2 if a.quick else a.episodes
    setups = [s.strip() for s in a.setups.split(",") if s.strip()]
    print(command_line("benchmarks.agent_episodes"))
    task = load_task()
    print(f"task {task.id}; {STEPS} actions per episode; {machine_line()}")
    print("| setup | at once | episodes | steps/s | CPU-s per episode | "
          "CPU ms per step | sandbox CPU-s per episode | wrong |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    runs: dict[str, list[Run]] = {}
    with others_watched():  # 64 sessions at once are the load: judge others' CPU
        for name in setups:
            if name == "docker exec":
                try:
                    base = DockerExec(task)
                except Exception as exc:  # no engine or image: say so, go on
                    print(f"| docker exec | skipped: {type(exc).__name__}: {str(exc)[:120]} |")
                    continue
                try:
                    runs[name] = measure(name, base.run_checked, levels, floor)
                finally:
                    base.close()
                continue
            try:
                sandbox = make_sandbox(name)
            except (SandboxUnavailable, ImportError) as exc:
                print(f"| {name} | skipped: {exc} |")
                continue
            try:
                ours, go = ours_go(sandbox)
                if name == "process" and a.before:
                    runs[name], runs["process before"] = [], []
                    with tempfile.TemporaryDirectory(prefix="agent-before-") as tmp:
                        then = child_go(
                            export_revision(a.before, Path(tmp)), floor, "process before"
                        )
                        now = child_go(Path(__file__).resolve().parents[1], floor, "process")
                        for level in levels:  # each in a child process, now then before
                            runs[name].append(now(level))
                            runs["process before"].append(then(level))
                else:
                    runs[name] = measure(name, go, levels, floor, ours.meter)
            finally:
                sandbox.close()
    summary(runs, levels)
    status = 1 if any(r.problems for rows in runs.values() for r in rows) else 0
    if a.model_share:
        from benchmarks.agent_model import model_share

        status = max(status, model_share(quick=a.quick))
    print(f"after: {machine_line()}")
    return status


if __name__ == "__main__":
    sys.exit(run_reported(lambda: main()))
