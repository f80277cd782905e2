"""The ``batch`` setup of ``sandbox_throughput``: the verify stage's own code path.

Each HumanEval problem is one task whose samples are its right and its wrong solution, each
``k // 2`` times (K=k; ``--batch-k``, default 2: each solution once, as in the other setups);
every task goes through ``tasksieve.verifiers.families.batch.verify_batch`` (what the pipeline's
verify stage runs per task, retries included) on ``get_verifier("code",
make_sandbox("process"))``, the tasks fed from ``workers`` threads. With the fork server this
is one multi-sample entry per task; elsewhere it falls back to one entry per sample.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from benchmarks.humaneval_jobs import Job
from benchmarks.timing import Pass, busy_seconds
from tasksieve.verifiers import get_verifier, make_sandbox
from tasksieve.verifiers.families.batch import verify_batch
from tasksieve.verifiers.retry import RetryPolicy

# The exit of a warm run before it stopped importing ``threading`` (``guest.pyrun.finish``).
NEW_EXIT = '    threading = sys.modules.get("threading")\n'
OLD_EXIT = "    import threading\n"
# A job's start before it ran where it was forked, with its environment set in place, its
# signals reset through the C function and random seeded once (``guest.warmrun``,
# ``guest.pyrun``, the server's ``boot``): (the guest's text now, its text before).
RUN_BEFORE = (
    (
        "        _signal.signal(sig, _signal.SIG_DFL)\n",
        "        signal.signal(sig, signal.SIG_DFL)\n",
    ),
    ("    set_environ(env)\n", "    os.environ.clear()\n    os.environ.update(env)\n"),
    (
        '    main = types.ModuleType("__main__")\n',
        '    if "random" in sys.modules:\n        sys.modules["random"].seed()\n'
        '    main = types.ModuleType("__main__")\n',
    ),
    (
        '    cfg["_run"] = lambda job: run_warm(job, warm)'
        "  # a forked job runs where it was forked\n",
        "",
    ),
)
# Before a run's IPC namespace was bounded, its SysV objects removed after each sample and
# jobs raised their oom_score_adj (``guest.ipclimits``, ``guest.nsutil.oom_adjust``); the
# server then also had no cgroup of its own (``servercg``).
IPC_BEFORE = (
    (
        '    if not limit_ipc(int(job.get("rlimits", {}).get("RLIMIT_AS", [0])[0])):'
        "  # (ipclimits)\n        _NOIPC.append(True)"
        "  # this entry's jobs get the filter refusing SysV IPC\n",
        "",
    ),
    (
        '        oom_adjust(int(job.get("oom_score_adj", 1000)))  # a run dies before the server\n',
        "",
    ),
    ("    remove_ipc(uid)  # its SysV objects too: the next sample finds none of them\n", ""),
    (
        "    with contextlib.suppress(OSError):  # with CAP_SYS_RESOURCE only (``servercg``)\n"
        "        oom_adjust(-1000)\n",
        "",
    ),
)
BEFORE = {"exit": ((NEW_EXIT, OLD_EXIT),), "run": RUN_BEFORE, "ipc": IPC_BEFORE}


def guest_before(sandbox: object, before: str) -> None:
    """Have ``sandbox``'s fork server run, from its next run on, the guest as it was before the
    change ``before`` (a key of ``BEFORE``); RuntimeError without a fork server or where the
    current guest lacks a text the change replaced."""
    server = getattr(sandbox, "_server", None)
    if server is None or any(now not in server.source for now, _ in BEFORE[before]):
        raise RuntimeError(f"the guest before {before!r} needs the fork server and this guest")
    for now, then in BEFORE[before]:
        server.source = server.source.replace(now, then)
    if before == "ipc":
        server._memory = -1  # and no cgroup of its own
    server.close()  # the probe started it with the current guest: the next run restarts it


def batch_setup(
    jobs: list[Job], k: int = 2, before: str | None = None
) -> tuple[str, Callable[[int], Pass], str, Callable[[], None]]:
    """(label, timed pass given the worker count, note, stop) for the batch setup.

    A pass's rate counts every execution (``k // 2`` per job); a job's verdict is its
    solution's when all its copies agree, else the wrong one (so any disagreement shows as a
    mismatch). ``before`` (a key of ``BEFORE``): the fork server runs the guest as it was
    before that change (``exit``: importing ``threading`` in every run's exit; ``run``: a job
    started as before ``RUN_BEFORE``), the before of that change in the same run.
    """
    copies = max(1, k // 2)
    sandbox = make_sandbox("process")
    if before:
        guest_before(sandbox, before)
    verifier = get_verifier("code", sandbox)
    groups: dict[str, list[int]] = {}
    for i, j in enumerate(jobs):
        groups.setdefault(j.problem["task_id"], []).append(i)
    order = list(groups.values())
    tasks = [jobs[g[0]].task() for g in order]
    policy = RetryPolicy()

    def one(t: int) -> list[bool]:
        sols = [jobs[i].solution for i in order[t]] * copies
        outs = verify_batch(verifier, tasks[t], sols, policy)
        passed = [o.verdict.status == "pass" for o in outs]
        n = len(order[t])
        return [
            passed[j] if len(set(passed[j::n])) == 1 else not jobs[order[t][j]].expect_pass
            for j in range(n)
        ]

    def run(workers: int) -> Pass:
        cpu0, t0 = busy_seconds(), time.perf_counter()
        if workers == 1:
            got = [one(k) for k in range(len(order))]
        else:
            with ThreadPoolExecutor(workers) as pool:
                got = list(pool.map(one, range(len(order))))
        wall, cpu = time.perf_counter() - t0, busy_seconds() - cpu0
        verdicts: list[bool] = [False] * len(jobs)
        for idx, vs in zip(order, got, strict=True):
            for i, v in zip(idx, vs, strict=True):
                verdicts[i] = v
        execs = len(jobs) * copies
        return Pass(execs / wall, 1000 * cpu / execs, verdicts)

    def stop() -> None:
        verifier.close()
        sandbox.close()

    who = "root" if os.geteuid() == 0 else f"uid {os.geteuid()}"
    label = f"tasksieve process backend ({who}), verify_batch per task (K={2 * copies})"
    if before == "exit":
        label += ", the exit before (threading imported in every run)"
    elif before == "run":
        label += ", a job's start before (frames unwound, environment rebuilt)"
    elif before == "ipc":
        label += ", before IPC limits, oom_score_adj and the server's cgroup"
    note = ", ".join(f"{k}={v}" for k, v in dict(getattr(sandbox, "describe", dict)()).items())
    return label, run, note, stop
