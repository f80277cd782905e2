"""SQL verifier throughput: warm sandboxed DuckDB workers vs one fresh process per verification.

Replays the example SQL tasks (reference solutions and recorded completions), repeated to
``--n`` verifications. Baseline: for each verification a fresh ``python -c`` process (not
sandboxed, so the baseline is flattered) imports duckdb, builds the database, runs the
reference (when the task has no expected rows) and the candidate, and prints tagged rows; the
verdict is computed here with the same comparison functions. Verifier: ``SqlVerifier`` with
warm workers, once with its reference cache and once without. Verdict statuses must agree.

    .venv/bin/python -m benchmarks.sql_throughput --n 240
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from schemas import SqlSpec, TaskRecord
from transforms.samplers.extract import extract_solution
from verifiers.families.sql.compare import Result, compare_results, decode_rows
from verifiers.families.sql.verifier import WORKER_SOURCE, SqlVerifier
from verifiers.sandbox.process.sandbox import ProcessSandbox

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
_BASELINE = (
    WORKER_SOURCE.replace('if __name__ == "__main__":', "if False:")
    + """
import duckdb, tempfile
req = json.loads(sys.stdin.read())
def run(con, q):
    try:
        cur = con.execute(q)
        return {"ok": True, "columns": [d[0] for d in cur.description],
                "rows": [[encode(v) for v in r] for r in cur.fetchall()]}
    except duckdb.Error as e:
        return {"ok": False, "error": str(e)}
with tempfile.TemporaryDirectory() as d:
    for name, text in req["files"].items():
        open(os.path.join(d, name), "w").write(text)
    os.chdir(d)
    con = duckdb.connect()
    con.execute(req["setup_sql"])
    ref = run(con, req["reference"]) if req["reference"] else None
    print(json.dumps({"ref": ref, "cand": run(con, req["candidate"])}))
"""
)


def jobs(n: int) -> list[tuple[TaskRecord, str]]:
    """Reference solutions and replayed completions of the example SQL tasks, ``n`` in all."""
    tasks = {}
    for ln in (EXAMPLES / "tasks" / "sql.jsonl").read_text().splitlines():
        if ln.strip():
            t = TaskRecord.model_validate_json(ln)
            tasks[t.id] = t
    base = [(t, t.reference_solution) for t in tasks.values()]
    for ln in (EXAMPLES / "replay" / "completions.jsonl").read_text().splitlines():
        row = json.loads(ln)
        if row["task_id"] in tasks:
            base.append((tasks[row["task_id"]], extract_solution(row["completion"], "sql")))
    return [base[i % len(base)] for i in range(n)]


def baseline_status(task: TaskRecord, solution: str) -> str:
    """The verdict status from one fresh, unsandboxed process."""
    spec = task.verifier
    assert isinstance(spec, SqlSpec)
    use_rows = spec.expected_rows is not None
    req = {
        "setup_sql": spec.setup_sql,
        "files": spec.files,
        "reference": None if use_rows else spec.reference_query,
        "candidate": solution,
    }
    out = subprocess.run(
        [sys.executable, "-c", _BASELINE], input=json.dumps(req), capture_output=True, text=True
    )
    if out.returncode != 0:
        return "error"
    res: dict[str, Any] = json.loads(out.stdout)
    if use_rows:
        want = Result(spec.expected_columns, decode_rows(spec.expected_rows or []))
    else:
        want = Result(res["ref"]["columns"], decode_rows(res["ref"]["rows"]))
    cand = res["cand"]
    if not cand["ok"]:
        return "error"
    got = Result(cand["columns"], decode_rows(cand["rows"]))
    return "pass" if compare_results(want, got, spec.compare) is None else "fail"


def main() -> None:
    """Run both sides, check the verdicts agree, print executions/s and the ratio."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=240, help="verifications per side")
    args = ap.parse_args()
    work = jobs(args.n)

    t0 = time.perf_counter()
    base = [baseline_status(t, s) for t, s in work]
    t_base = time.perf_counter() - t0

    results: dict[str, tuple[float, list[str]]] = {}
    sandbox = ProcessSandbox()
    for label, cache in (("warm, reference cache", 1024), ("warm, no cache", 0)):
        v = SqlVerifier(sandbox, cache_size=cache)
        for t, s in work[:30]:  # start the workers (and fill the cache) untimed
            v.verify(t, s)
        t0 = time.perf_counter()
        statuses: list[str] = [v.verify(t, s).status for t, s in work]
        results[label] = (time.perf_counter() - t0, statuses)
        v.close()

    n = len(work)
    print(f"verifications: {n} (sandbox: {sandbox.method})")
    print(f"baseline, fresh process each: {n / t_base:8.1f} /s  ({t_base:.2f} s)")
    ok = True
    for label, (secs, statuses) in results.items():
        same = statuses == base
        ok &= same
        print(
            f"verifier, {label:22s}: {n / secs:8.1f} /s  ({secs:.2f} s)  "
            f"x{t_base / secs:.1f} vs baseline  verdicts {'agree' if same else 'DIFFER'}"
        )
    if not ok:
        sys.exit(1)


if __name__ == "__main__":
    main()
