"""SQL verification throughput: our sandboxed DuckDB workers against in-process DuckDB, one run.

Workload (``benchmarks.sql_jobs``): distinct questions derived from the example SQL tasks,
five candidates each (two right, two wrong, one that errors), shuffled. Every pass gets a
fresh salt on each setup SQL, so to every cache each pass is a stream of new tasks with five
samples each (the first sample of a task misses, the next four can hit). Samples of all tasks
are shuffled together; ``--grouped`` verifies a task's five one after another instead (then
databases kept per setup are reused; shuffled, a worker sees up to 67 setups between two
samples of a task and keeps only 16). Setups:

- (a) a fresh in-process ``duckdb.connect()`` per verification (setup, reference, candidate);
- (b) one warm in-process connection per worker thread, databases kept per setup;
- ours: ``get_verifier("sql", make_sandbox("process"))``: warm sandboxed DuckDB workers,
  reference results cached in the verifier.

Each round runs every setup with 1 worker and with ``--workers`` threads, the order rotated
each round. Verdict statuses (pass/fail/error) of every setup are compared with each other
and with the intended ones in every round; any difference is printed and the exit status is 1.
The reference-cache hit rate is measured from the size of the verifier's cache (a private
attribute, read only) before and after each pass; where it is not readable the expected rate
from the workload's distinct references is printed instead.

    python -m benchmarks.sql_throughput --rounds 3 --workers 4
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from collections.abc import Callable

from benchmarks import sql_setups as ss
from benchmarks.sql_jobs import SqlJob, distinct_references, jobs
from benchmarks.timing import (
    Pass,
    best,
    command_line,
    machine_line,
    median,
    rotated,
    run_reported,
    timed_pass,
)
from tasksieve.verifiers import get_verifier, make_sandbox

LABELS = {
    "a": "(a) fresh in-process duckdb.connect() per verification",
    "b": "(b) warm in-process connection per thread, databases kept",
    "ours": "tasksieve SQL verifier, process sandbox",
}


def cache_size(verifier: object) -> int | None:
    """Entries in the verifier's reference cache, or None where it cannot be read."""
    cache = getattr(verifier, "_cache", None)
    return len(cache) if cache is not None and hasattr(cache, "__len__") else None


def disagreements(work: list[SqlJob], got: dict[str, list[str]]) -> list[str]:
    """Jobs where some setup's status differs from the intended one."""
    out = []
    for i, j in enumerate(work):
        seen = {k: v[i] for k, v in got.items()}
        if any(s != j.expect for s in seen.values()):
            out.append(f"{j.task.id} expect {j.expect}, got {seen}: {j.candidate[:120]!r}")
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; 1 if any verdict differs in any round."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workers", type=int, default=4, help="the N of 'workers 1 and N'")
    ap.add_argument("--n", type=int, default=0, help="questions to use (0: all); 5 jobs each")
    ap.add_argument("--quick", action="store_true", help="smoke run: 4 questions, 1 round")
    ap.add_argument(
        "--grouped", action="store_true", help="a task's five samples one after another"
    )
    args = ap.parse_args(argv)
    if args.quick:
        args.rounds, args.n, args.workers = 1, args.n or 4, min(args.workers, 2)
    if args.rounds < 1 or args.workers < 1 or args.n < 0:
        ap.error("need rounds >= 1, workers >= 1, n >= 0")
    print(f"command: {command_line('benchmarks.sql_throughput')}")
    work: list[SqlJob] = jobs(args.n, salt="warm-up", grouped=args.grouped)
    tmp = tempfile.mkdtemp(prefix="sql-bench-")
    files = ss.DataFiles(work, tmp)
    sandbox = make_sandbox("process")
    verifier = get_verifier("sql", sandbox)
    checks: dict[str, Callable[[int], str]] = {
        "a": ss.fresh_connection(work, files),
        "b": ss.warm_connection(work, files),
        "ours": lambda i: verifier.verify(work[i].task, work[i].candidate).status,
    }
    counts = sorted({1, args.workers})
    passes: dict[str, dict[int, list[Pass]]] = {k: {w: [] for w in counts} for k in checks}
    hits: dict[int, list[float]] = {w: [] for w in counts}
    bad = 0
    try:
        for check in checks.values():  # untimed: start workers, first connections
            timed_pass(check, len(work), args.workers)
        order = "grouped by task" if args.grouped else "shuffled"
        print(f"{len(work)} verifications per pass ({order}), {distinct_references(work)} tasks")
        print(f"before: {machine_line()}")
        for r in range(args.rounds):
            for w in counts:
                work[:] = jobs(args.n, salt=f"round {r} workers {w}", grouped=args.grouped)
                got: dict[str, list[str]] = {}
                for key in rotated(list(checks), r):
                    size0 = cache_size(verifier)
                    p = timed_pass(checks[key], len(work), w)
                    size1 = cache_size(verifier)
                    if key == "ours" and size0 is not None and size1 is not None:
                        hits[w].append(1 - (size1 - size0) / len(work))
                    passes[key][w].append(p)
                    got[key] = p.verdicts
                    print(f"round {r + 1}, {w} worker(s), {key}: {p.rate:.1f} verifications/s")
                wrong = disagreements(work, got)
                bad += len(wrong)
                for m in wrong:
                    print(f"  MISMATCH: {m}")
    finally:
        verifier.close()
        sandbox.close()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"after: {machine_line()}\n")
    report(passes, counts, hits, work)
    if bad:
        print(f"\nFAILED: {bad} verdicts differ (see MISMATCH lines)")
        return 1
    mix = {s: sum(j.expect == s for j in work) for s in ("pass", "fail", "error")}
    print(f"\nverdicts: all setups agree with the intended ones in every round ({mix} per pass)")
    return 0


def report(
    passes: dict[str, dict[int, list[Pass]]],
    counts: list[int],
    hits: dict[int, list[float]],
    work: list[SqlJob],
) -> None:
    """The table, the ratios and the reference-cache hit rate."""
    cols = " | ".join(f"{w} worker(s): best / median per s" for w in counts)
    print(f"| setup | {cols} | CPU ms/verification (median, {counts[-1]} workers) |")
    print("|---" * (len(counts) + 2) + "|")
    for key, by_w in passes.items():
        cells = " | ".join(
            f"{best([p.rate for p in by_w[w]]):.1f} / {median([p.rate for p in by_w[w]]):.1f}"
            for w in counts
        )
        cpu = median([p.cpu_ms for p in by_w[counts[-1]]])
        print(f"| {LABELS[key]} | {cells} | {cpu:.1f} |")
    print()
    for base in ("a", "b"):
        parts = []
        for w in counts:
            ours, other = passes["ours"][w], passes[base][w]
            b = best([p.rate for p in ours]) / best([p.rate for p in other])
            m = median([p.rate for p in ours]) / median([p.rate for p in other])
            rounds = [x.rate / y.rate for x, y in zip(ours, other, strict=True)]
            each = " ".join(f"{q:.2f}" for q in rounds)
            parts.append(f"{w} worker(s): best {b:.2f}x, median {m:.2f}x, per round {each}")
        print(f"ratio ours/({base}): " + "; ".join(parts))
    expected = 1 - distinct_references(work) / len(work)
    for w in counts:
        if hits[w]:
            rates = ", ".join(f"{h:.1%}" for h in hits[w])
            print(f"reference-cache hit rate, {w} worker(s), measured per pass: {rates}", end="")
            print(f" (expected from the workload: {expected:.1%})")
        else:
            print(f"reference-cache hit rate: cache not readable; expected {expected:.1%}")


if __name__ == "__main__":
    sys.exit(run_reported(main))
