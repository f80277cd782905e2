"""An eval's aggregates over its per-task scores: overall, per family, bucket and source.

Each group reports its tasks, pass@k for every k with a bootstrap interval over the group's
tasks (``pipeline.eval.passk``), success by turn (mean over tasks of c_t / n, with its
interval), the failure kinds counted, the mean reward and its components, and the cost:
tokens, sandbox wall seconds and sandbox CPU seconds in total, per task, per solved task (a
task with at least one passing sample) and per passing sample. The CPU seconds also say how
many verdicts were measured (``measured`` of ``verdicts``): the totals cover those only.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from tasksieve.pipeline.eval.passk import RESAMPLES, bootstrap_mean, estimate
from tasksieve.pipeline.eval.scores import COMPONENTS, FAILURE_KINDS

GROUPINGS = ("family", "bucket", "source")


def _mean(values: Sequence[float | None]) -> float | None:
    known = [float(v) for v in values if v is not None]
    return sum(known) / len(known) if known else None


def _per(total: float | None, count: int) -> float | None:
    return None if total is None or count == 0 else total / count


def _cost(rows: Sequence[dict[str, Any]], name: str) -> dict[str, float | None]:
    known = [r[name] for r in rows if r.get(name) is not None]
    total = float(sum(known)) if known else None
    solved = sum(1 for r in rows if r["c"] > 0)
    passes = sum(r["c"] for r in rows)
    return {
        "total": total,
        "per_task": _per(total, len(rows)),
        "per_solved_task": _per(total, solved),
        "per_passing_sample": _per(total, passes),
    }


def _by_turn(rows: Sequence[dict[str, Any]], resamples: int) -> list[dict[str, float | int]]:
    scored = [r for r in rows if r["n"] > 0]
    if not scored:
        return []
    out = []
    for t in range(len(scored[0]["c_by_turn"])):
        rates = [r["c_by_turn"][t] / r["n"] for r in scored]
        lo, hi = bootstrap_mean(rates, resamples)
        out.append({"turn": t + 1, "success": sum(rates) / len(rates), "ci_low": lo, "ci_high": hi})
    return out


def group_summary(
    rows: Sequence[dict[str, Any]], ks: Sequence[int], resamples: int = RESAMPLES
) -> dict[str, Any]:
    """The aggregates of one group of task scores."""
    nc = [(int(r["n"]), int(r["c"])) for r in rows if r["n"] > 0]
    return {
        "tasks": len(rows),
        "samples": sum(int(r["n"]) for r in rows),
        "solved_tasks": sum(1 for r in rows if r["c"] > 0),
        "pass_at_k": {str(k): estimate(nc, k, resamples).as_dict() for k in ks},
        "success_by_turn": _by_turn(rows, resamples),
        "failures": {kind: sum(int(r[f"fail_{kind}"]) for r in rows) for kind in FAILURE_KINDS},
        "reward": {
            "mean": _mean([r["reward"] for r in rows]),
            **{name: _mean([r[f"reward_{name}"] for r in rows]) for name in COMPONENTS},
        },
        "completion_tokens": _cost(rows, "completion_tokens"),
        "sandbox_s": _cost(rows, "sandbox_s"),
        "sandbox_cpu_s": {
            **_cost(rows, "sandbox_cpu_s"),
            "measured": sum(int(r.get("cpu_measured") or 0) for r in rows),
            "verdicts": sum(int(r["attempts"]) for r in rows),
        },
    }


def summarise(
    rows: Sequence[dict[str, Any]], ks: Sequence[int], resamples: int = RESAMPLES
) -> dict[str, Any]:
    """``overall`` and one entry per value of each grouping (``by_family``, ...)."""
    out: dict[str, Any] = {"ks": list(ks), "interval": _interval_note(resamples)}
    out["overall"] = group_summary(rows, ks, resamples)
    for name in GROUPINGS:
        groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for r in rows:
            groups[str(r[name])].append(r)
        out[f"by_{name}"] = {
            key: group_summary(members, ks, resamples) for key, members in sorted(groups.items())
        }
    return out


def _interval_note(resamples: int) -> str:
    return f"95% percentile bootstrap over tasks, {resamples} resamples, seed 0"
