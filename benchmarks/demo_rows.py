"""Whether two curate outputs kept and rejected the same tasks, for the same reasons.

Compares the rows of ``tasks/`` (kept) and ``rejected/`` of two output directories (e.g. a run
of ``benchmarks.demo_costs --keep A`` before a change and ``--keep B`` after it), task by task:
which tasks are kept, which are rejected at which stage with which reason and detail, and every
other field of a row except what differs between any two runs (run ids, paths, clocks:
``VOLATILE`` names and every ``*_s`` / ``*_at`` field, at any depth). Pass rates and samples
are compared as written; with a sampler that is not deterministic (a model at temperature > 0
on another machine), compare with ``--decisions`` only: kept/rejected, stage and reason.

Run: ``PYTHONPATH=. python -m benchmarks.demo_rows BEFORE AFTER [--decisions]``; exit 0 when
identical, 1 with the differences listed (at most ``--show`` of them).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

VOLATILE = frozenset(
    {"run_id", "created_at", "finished_at", "source_path", "source_file", "duration_s", "output"}
)


def stable(value: Any) -> Any:
    """``value`` without the fields that differ between two runs of the same inputs."""
    if isinstance(value, dict):
        return {
            k: stable(v)
            for k, v in sorted(value.items())
            if k not in VOLATILE and not k.endswith(("_s", "_at"))
        }
    if isinstance(value, list):
        return [stable(v) for v in value]
    return value


def rows(out: Path, part: str) -> dict[str, list[Any]]:
    """Every row below ``out/part`` as stable dicts, by task id (a task may have several)."""
    import pyarrow.parquet as pq

    got: dict[str, list[Any]] = {}
    for f in sorted((out / part).rglob("*.parquet")):
        for row in pq.read_table(f).to_pylist():
            key = str(row.get("id") or row.get("record_id") or row.get("task_id") or "")
            got.setdefault(key, []).append(stable(row))
    for key in got:
        got[key].sort(key=lambda r: json.dumps(r, sort_keys=True, default=str))
    return got


def decision(row: dict[str, Any]) -> dict[str, Any]:
    return {k: row.get(k) for k in ("stage", "reason")}


def compare(a: Path, b: Path, decisions_only: bool) -> list[str]:
    """Every difference between the two outputs, as lines."""
    diffs: list[str] = []
    for part in ("tasks", "rejected"):
        ra, rb = rows(a, part), rows(b, part)
        for key in sorted(set(ra) | set(rb)):
            if key not in rb:
                diffs.append(f"{part}: {key} only in {a}")
            elif key not in ra:
                diffs.append(f"{part}: {key} only in {b}")
            else:
                left, right = ra[key], rb[key]
                if decisions_only:
                    left = [decision(r) for r in left] if part == "rejected" else [key]
                    right = [decision(r) for r in right] if part == "rejected" else [key]
                if left != right:
                    diffs.append(f"{part}: {key} differs: {_first_change(left, right)}")
    return diffs


def _first_change(left: list[Any], right: list[Any]) -> str:
    if len(left) != len(right):
        return f"{len(left)} rows against {len(right)}"
    for x, y in zip(left, right, strict=True):
        if isinstance(x, dict) and isinstance(y, dict):
            for k in sorted(set(x) | set(y)):
                if x.get(k) != y.get(k):
                    return f"{k}: {str(x.get(k))[:200]!r} -> {str(y.get(k))[:200]!r}"
        elif x != y:
            return f"{str(x)[:200]!r} -> {str(y)[:200]!r}"
    return "order"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    ap.add_argument("--decisions", action="store_true", help="kept/rejected, stage, reason only")
    ap.add_argument("--show", type=int, default=20)
    args = ap.parse_args(argv)
    for out in (args.before, args.after):
        if not (out / "tasks").is_dir() and not (out / "rejected").is_dir():
            print(f"{out}: not a curate output (no tasks/ or rejected/)", file=sys.stderr)
            return 2
    diffs = compare(args.before, args.after, args.decisions)
    kept = [len(rows(o, "tasks")) for o in (args.before, args.after)]
    gone = [len(rows(o, "rejected")) for o in (args.before, args.after)]
    print(f"kept {kept[0]} / {kept[1]}, rejected {gone[0]} / {gone[1]} (before / after)")
    for line in diffs[: args.show]:
        print(line)
    if len(diffs) > args.show:
        print(f"... and {len(diffs) - args.show} more")
    print("identical" if not diffs else f"{len(diffs)} differences")
    return 0 if not diffs else 1


if __name__ == "__main__":
    sys.exit(main())
