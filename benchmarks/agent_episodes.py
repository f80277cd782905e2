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
Docker daemons (``agent_steps.run_cpu_seconds``), plus, for the process backend, the CPU of
each session's processes read just before it closes (``Metered``; also shown alone as the
sandbox CPU per episode). Not counted: the other work on the machine, and the processes inside
containers (so the docker figures are lower bounds); a reaped bubblewrap may carry part of its
session's CPU, counted twice (so the process figures are upper bounds).
``--model-share`` adds the share of an episode's wall time spent in the sandbox vs waiting for
the model (``benchmarks.agent_model``). Every run checks that each action exited 0 and each
episode's diff shows the patched file; a wrong one makes the exit status 1.

    python -m benchmarks.agent_episodes                 # 1, 8, 64 episodes; three setups
    python -m benchmarks.agent_episodes --quick         # 1 and 4; a minute or so
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from benchmarks.agent_steps import DockerExec, Metered, Ours, Run, load_task, timed_level
from benchmarks.timing import command_line, goal, machine_line, run_reported
from tasksieve.verifiers.registry import make_sandbox
from tasksieve.verifiers.sandbox.base import Sandbox, SandboxUnavailable

Go = Callable[[int, int], list[str]]


def measure(
    name: str, go: Go, levels: list[int], floor: int, meter: Metered | None = None
) -> list[Run]:
    """One warm-up episode, then each level; prints a row per level."""
    problems = go(1, 1)
    if problems:
        print(f"  {name}: warm-up episode went wrong: {problems[0]}")
    runs = []
    for level in levels:
        episodes = max(level, floor)
        inside0 = meter.sandbox_s if meter is not None else 0.0
        wall, cpu, problems = timed_level(go, episodes, level)
        inside = meter.sandbox_s - inside0 if meter is not None else None
        cpu += inside or 0.0
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


def ours_go(sandbox: Sandbox) -> tuple[Ours, Go]:
    """Our episodes over ``sandbox`` (metered where it is the process backend)."""
    ours = Ours(sandbox, load_task())

    def go(episodes: int, level: int) -> list[str]:
        return ours.problems(ours.run(episodes, level))

    return ours, go


def summary(runs: dict[str, list[Run]], levels: list[int]) -> None:
    base = {r.level: r for r in runs.get("docker exec", [])}
    for name, rows in runs.items():
        if name == "docker exec":
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
