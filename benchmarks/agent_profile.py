"""Where a process-backend agent step's CPU goes: the command's own, the sandbox's per step, and
the per-episode fixed costs (session open and close, the final diff) spread over the steps.

Each part is measured alone, on the workload of ``benchmarks.agent_steps`` (one shipped repo
task, six actions), in one process, one session at a time:

- **command alone**: each action run by ``bash -c`` in a fresh copy of the repository on the
  host, no sandbox (the CPU of the processes it starts, read from ``RUSAGE_CHILDREN``), less
  the CPU of ``bash -c :`` (the extra bash that ``bash -c`` costs and the session's shell does
  not);
- **per step, in the session**: the host's CPU (``RUSAGE_THREAD`` of the calling thread: the
  frame, JSON, base64, the wait) and the guest's, split into the agent (the guest Python
  serving frames), the shell's own (bash alone: parsing, forking, waiting, the status report)
  and the commands (every process the shell reaped), for a no-op step (``:``), for a step
  whose text is as long as the patch step's but which does nothing (``: <<'EOF' ... EOF``),
  for the interpreter's start, and for each real action;
- **per episode**: opening a session with its hidden tests removed, then closing it (host
  thread, reaped children, the guest), and the final diff, with the per-step share of each at
  six steps.

``--profile`` adds the host's hottest functions (``cProfile``, one episode in this thread).

    python -m benchmarks.agent_profile               # 20 repeats of each part
    python -m benchmarks.agent_profile --repeat 5 --profile
    python -m benchmarks.agent_profile --before REV  # then the same with git revision REV

``--before REV`` runs this same script again, right after, over the code of git revision
``REV`` of this checkout (exported with ``git archive``; this checkout's benchmark files are
copied in), so that
both tables come from one run on one machine.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from benchmarks.agent_episodes import export_revision
from benchmarks.agent_steps import IMAGE, Ours, load_task
from benchmarks.timing import command_line, machine_line, run_reported
from tasksieve.transforms.agent.scripted import apply_command
from tasksieve.verifiers.families.repo.snapshots import SnapshotStore
from tasksieve.verifiers.registry import make_sandbox
from tasksieve.verifiers.sandbox.workspace import Workspace

TICK = os.sysconf("SC_CLK_TCK")
LABELS = ("ls", "grep", "head", "patch (python heredoc)", "parse (python -c)", "wc")


def thread_cpu() -> float:
    use = resource.getrusage(resource.RUSAGE_THREAD)
    return use.ru_utime + use.ru_stime


def children_cpu() -> float:
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


def _own_seconds(pid: int, stat_fields: list[bytes]) -> float:
    """A process's own CPU seconds: from ``schedstat`` (nanoseconds, every thread) where the
    kernel keeps it, else from ``stat`` (clock ticks)."""
    try:
        return int((Path(f"/proc/{pid}/schedstat").read_bytes().split() or [b"x"])[0]) / 1e9
    except (OSError, ValueError):
        return (int(stat_fields[11]) + int(stat_fields[12])) / TICK


def session_split(host_pid: int | None) -> dict[str, float]:
    """CPU seconds of a live session's processes by role: ``agent`` (the guest Python's own),
    ``shell`` (each bash with the children it reaped), ``shell_own`` (each bash alone: parsing,
    forking, waiting, the status report), ``other`` (the rest, bubblewrap). Own time is in
    nanoseconds (``schedstat``); what a process reaped only in clock ticks (so ``shell`` less
    ``shell_own``, the commands, is exact only on average)."""
    out = {"agent": 0.0, "shell": 0.0, "shell_own": 0.0, "other": 0.0}
    if host_pid is None:
        return out
    kids: dict[int, list[int]] = {}
    info: dict[int, tuple[bytes, list[bytes]]] = {}
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            raw = (p / "stat").read_bytes()
        except OSError:
            continue
        comm = raw[raw.index(b"(") + 1 : raw.rindex(b")")]
        fields = raw.rsplit(b")", 1)[1].split()
        info[int(p.name)] = (comm, fields)
        kids.setdefault(int(fields[1]), []).append(int(p.name))
    todo = [host_pid]
    while todo:
        pid = todo.pop()
        todo += kids.get(pid, [])
        if pid not in info:
            continue
        comm, f = info[pid]
        own, reaped = _own_seconds(pid, f), (int(f[13]) + int(f[14])) / TICK
        if comm.startswith(b"python"):
            out["agent"] += own
            out["other"] += reaped  # a reaped shell from before a restart
        elif comm == b"bash":
            out["shell"] += own + reaped
            out["shell_own"] += own
        else:
            out["other"] += own + reaped
    return out


def command_alone(tree: Path, steps: list[str], repeat: int, env: Mapping[str, str]) -> list[float]:
    """CPU ms of each action by ``bash -c`` in a fresh copy of ``tree`` with the session's
    variables ``env`` (its PATH: the same Python), less ``bash -c :``; the last item is
    ``bash -c :`` itself."""
    per = [0.0] * (len(steps) + 1)
    with tempfile.TemporaryDirectory(prefix="agent-prof-") as tmp:
        for _ in range(repeat):
            work = Path(tmp) / "repo"
            if work.exists():
                shutil.rmtree(work)
            shutil.copytree(tree, work, symlinks=True)
            for i, cmd in enumerate([":", *steps]):
                c0 = children_cpu()
                subprocess.run(["bash", "-c", cmd], cwd=work, env={**os.environ, **env},
                               capture_output=True, check=True)  # fmt: skip
                per[i] += children_cpu() - c0
    bash = per[0] / repeat
    return [1000 * (x / repeat - bash) for x in per[1:]] + [1000 * bash]


def step_cost(ws: Workspace, cmd: str, repeat: int) -> tuple[float, float, float, float]:
    """(host, guest agent, shell's own, the commands) CPU ms per ``exec(cmd)`` in ``ws``, over
    ``repeat`` calls."""
    pid = getattr(ws, "host_pid", None)
    g0, h0 = session_split(pid), thread_cpu()
    for _ in range(repeat):
        res = ws.exec(cmd)
        if res.exit_code != 0:
            raise RuntimeError(f"{cmd[:40]!r} exited {res.exit_code}: {res.stderr[-200:]!r}")
    h1, g1 = thread_cpu(), session_split(pid)
    ms = 1000 / repeat
    d = {k: (g1[k] - g0[k]) * ms for k in g0}
    return (h1 - h0) * ms, d["agent"], d["shell_own"], d["shell"] - d["shell_own"]


def _row(label: str, alone: str, cost: tuple[float, ...]) -> None:
    print(f"| {label} | {alone} | " + " | ".join(f"{x:.2f}" for x in cost) + " |")


def profile_run(ours: Ours, repeat: int) -> dict[str, object]:
    """Every measurement of the module doc on the process backend, printed as it goes."""
    task, steps = ours.task, ours.steps
    tree = SnapshotStore(ours.verifier.store.root).path(  # type: ignore[union-attr]
        task.verifier.snapshot  # type: ignore[union-attr]
    )
    alone = command_alone(tree, steps, repeat, ours.opener.spec(task).env_vars)
    print(f"\nbash -c : itself: {alone[-1]:.2f} ms (taken off each row below)")
    print("| action | command alone, ms | host ms | guest agent ms | shell's own ms | "
          "commands in the session, ms |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    # per-step overhead: no-op, a long no-op, the interpreter's start, in one session
    ws = ours.opener.open(task)
    try:
        noop = step_cost(ws, ":", repeat * 10)
        tag = "EOF_PROF"
        body = apply_command(task.reference_solution or "", "python3").split("\n", 1)[1]
        long_noop = step_cost(ws, f": <<'{tag}'\n{body}", repeat * 5)
        loop = "for i in 1 2 3 4 5 6 7 8 9 10; do python3 {} -c pass || exit 1; done"
        py = tuple(x / 10 for x in step_cost(ws, loop.format(""), repeat))
        py_s = tuple(x / 10 for x in step_cost(ws, loop.format("-S"), repeat))
    finally:
        ws.close()
    _row("python3 -c pass (interpreter start)", "-", py)
    _row("python3 -S -c pass (no site)", "-", py_s)
    _row("no-op `:`", "0", noop)
    _row(f"no-op as long as the patch step ({len(body)} B)", "0", long_noop)
    rows = [[0.0] * 4 for _ in steps]  # ms summed over the repeats
    host_fixed = reaped = guest_all = wall = 0.0  # seconds summed over the repeats
    diffs = [0.0, 0.0, 0.0]  # host, agent, shell seconds
    for _ in range(repeat):
        t0, h0, c0 = time.perf_counter(), thread_cpu(), children_cpu()
        ws = ours.opener.open(task)
        pid = getattr(ws, "host_pid", None)
        host_fixed += thread_cpu() - h0
        for i, cmd in enumerate(steps):
            got = step_cost(ws, cmd, 1)
            rows[i] = [a + b for a, b in zip(rows[i], got, strict=True)]
        g0, h1 = session_split(pid), thread_cpu()
        if patch_path(ours) not in ws.diff():
            raise RuntimeError("the diff misses the patched file")
        h2, g1 = thread_cpu(), session_split(pid)
        diffs = [diffs[0] + h2 - h1, diffs[1] + g1["agent"] - g0["agent"],
                 diffs[2] + g1["shell"] - g0["shell"]]  # fmt: skip
        guest_all += g1["agent"] + g1["shell"] + g1["other"]
        h3 = thread_cpu()
        ws.close()
        host_fixed += thread_cpu() - h3
        reaped += children_cpu() - c0
        wall += time.perf_counter() - t0
    for i, label in enumerate(LABELS[: len(steps)]):
        _row(label, f"{alone[i]:.2f}", tuple(x / repeat for x in rows[i]))
    step_host, step_agent, step_own, step_cmds = (
        sum(r[k] for r in rows) / repeat for k in range(4)
    )
    cmd_total = sum(alone[: len(steps)])
    n = len(steps)
    d_host, d_agent, d_shell = (1000 * x / repeat for x in diffs)
    # the session's whole CPU less what its steps and diff used = its start-up and teardown
    guest_total = 1000 * guest_all / repeat
    session_fixed = guest_total - step_agent - step_own - step_cmds - d_agent - d_shell
    # what the host reaped (bubblewrap, the session's launcher; the guest, killed at close,
    # passes none of its CPU up: its figure comes from /proc just before the close)
    other = 1000 * reaped / repeat
    print(f"\nper episode of {n} steps ({repeat} episodes, one at a time):")
    print("| part | CPU ms per episode | ms per step |")
    print("|---|---|---|")
    parts = [
        ("steps: the commands, in the session (the shell's reaped children)", step_cmds),
        ("steps: host (frame, JSON, base64, wait, bookkeeping)", step_host),
        ("steps: guest agent", step_agent),
        ("steps: the shell's own (parse, fork, wait, status)", step_own),
        ("final diff: host", d_host),
        ("final diff: guest", d_agent + d_shell),
        ("session open and close: host thread", 1000 * host_fixed / repeat),
        ("session open and close: guest start-up, hiding the tests, teardown", session_fixed),
        ("session open and close: processes the host reaped", other),
    ]
    print(f"(the same commands alone, by bash -c on the host: {cmd_total:.1f} ms per episode)")
    total = sum(v for _, v in parts)
    for label, v in parts:
        print(f"| {label} | {v:.1f} | {v / n:.2f} |")
    print(f"| total | {total:.1f} | {total / n:.2f} |")
    print(f"wall per episode (open to close, one at a time): {1000 * wall / repeat:.0f} ms")
    return {"parts": parts, "noop": noop, "long_noop": long_noop}


def image_python_ms(repeat: int) -> float | None:
    """CPU ms of ``python3 -c pass`` inside the docker image the ``docker exec`` baseline
    builds on (None without an engine): the baseline's interpreter, not the session's."""
    prog = (
        "import resource,subprocess\n"
        "u=lambda: sum(resource.getrusage(resource.RUSAGE_CHILDREN)[:2])\n"
        f"c=u()\nfor _ in range({repeat}): subprocess.run(['python3','-c','pass'])\n"
        f"print((u()-c)/{repeat}*1000)"
    )
    argv = ["docker", "run", "--rm", "--network", "none", IMAGE, "python3", "-c", prog]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
        return float(done.stdout.strip().splitlines()[-1])
    except (OSError, ValueError, IndexError, subprocess.SubprocessError):
        return None


def patch_path(ours: Ours) -> str:
    from benchmarks.agent_steps import patched_file

    return patched_file(ours.task)


def hot_functions(go: Callable[[], object], top: int = 25) -> None:
    """The host's hottest functions while ``go`` runs in this thread (``cProfile``)."""
    prof = cProfile.Profile()
    prof.enable()
    go()
    prof.disable()
    print(f"\nhost functions by own time ({top} hottest, one episode in this thread):")
    pstats.Stats(prof, stream=sys.stdout).sort_stats("tottime").print_stats(top)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--repeat", type=int, default=20, help="repeats of each measurement")
    ap.add_argument("--profile", action="store_true", help="also cProfile one episode")
    ap.add_argument("--before", metavar="REV", help="then the same over git revision REV")
    a = ap.parse_args(argv)
    print(command_line("benchmarks.agent_profile"))
    print(f"before: {machine_line()}")
    sandbox = make_sandbox("process")
    try:
        ours = Ours(sandbox, load_task())
        ours.run(1, 1)  # warm-up
        profile_run(ours, a.repeat)
        img = image_python_ms(a.repeat)
        shown = "no docker engine" if img is None else f"{img:.2f} ms"
        print(f"python3 -c pass in the docker exec baseline's image ({IMAGE}): {shown}")
        if a.profile:
            from tasksieve.transforms.agent.config import AgentConfig
            from tasksieve.transforms.agent.driver import run_episodes

            cfg = AgentConfig(**{**ours.cfg.__dict__, "concurrency": 1})

            def one() -> object:
                from concurrent.futures import Executor

                class Inline(Executor):  # the episode's work in this (profiled) thread
                    def map(self, fn, *its, **_):
                        return [fn(*args) for args in zip(*its, strict=True)]

                return run_episodes([(ours.task, 0)], ours.policy, ours.opener, ours.verifier,
                                    cfg, pool=Inline())  # type: ignore[arg-type]  # fmt: skip

            hot_functions(one)
    finally:
        sandbox.close()
    if a.before:
        print(f"\n## the same over revision {a.before}\n", flush=True)
        with tempfile.TemporaryDirectory(prefix="agent-prof-before-") as tmp:
            root = export_revision(a.before, Path(tmp))
            cmd = [sys.executable, "-m", "benchmarks.agent_profile", "--repeat", str(a.repeat)]
            env = {**os.environ, "PYTHONPATH": str(root)}
            if subprocess.run(cmd, cwd=root, env=env, timeout=1800).returncode != 0:
                return 1
    print(f"after: {machine_line()}")
    return 0


if __name__ == "__main__":
    sys.exit(run_reported(lambda: main()))
