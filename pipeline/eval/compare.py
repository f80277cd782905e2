"""``eval compare A B``: two evals paired task by task, with a bootstrap verdict.

Only the tasks both evals scored are compared (those in one alone are counted). Per task the
metric is its pass@1 estimate ``c / n``, and the mean reward and each reward component; the
costs (``COSTS``: sandbox wall and CPU seconds, completion tokens, per task) are compared the
same way, on the tasks where both evals have the figure, with ``better`` meaning B costs less;
the difference is B - A. The interval is a paired percentile bootstrap: the same resampled task
indices for A and B, so what the two share (task difficulty) cancels. The verdict on pass@1:
``better`` when the whole 95% interval is above 0, ``worse`` when below, else ``not
distinguishable``. A task flipped when one eval solved it (some sample passed) and the other
did not. What this does NOT do: correct for comparing many metrics or families at once (each
interval is a 95% interval on its own), or check that A and B used the same tasks' versions.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tasksieve.pipeline.eval.passk import RESAMPLES, SEED
from tasksieve.pipeline.eval.scores import COMPONENTS

METRICS = ("pass_at_1", "reward", *(f"reward_{c}" for c in COMPONENTS))
COSTS = ("sandbox_s", "sandbox_cpu_s", "completion_tokens")
"""Per-task costs compared like the metrics, where lower is better (``better``: B costs less)."""


class CompareError(ValueError):
    """A or B is not an eval output, or they share no scored task."""


def read_scores(out: str) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The manifest and the per-task scores (by task id) of the eval output ``out``."""
    import json

    import pyarrow.parquet as pq

    root = Path(out)
    manifest_path = root / "manifest.json"
    try:
        manifest = json.loads(manifest_path.read_text())
    except (OSError, ValueError) as e:
        raise CompareError(f"{out}: not an eval output (no readable manifest.json: {e})") from None
    if not isinstance(manifest, dict) or manifest.get("kind") != "eval":
        raise CompareError(f"{out}: not an eval output (its manifest is not of kind 'eval')")
    rows: dict[str, dict[str, Any]] = {}
    for shard in sorted((root / "scores").rglob("*.parquet")):
        for row in pq.read_table(shard).to_pylist():
            if row["n"] > 0:
                row["pass_at_1"] = row["c"] / row["n"]
                rows[row["task_id"]] = row
    return manifest, rows


def paired_interval(
    diffs: Sequence[float], resamples: int = RESAMPLES, seed: int = SEED
) -> tuple[float, float, float]:
    """Mean of the paired differences and its 95% percentile bootstrap interval."""
    arr = np.asarray(diffs, dtype=float)
    mean = float(arr.mean())
    if len(arr) == 1:
        return mean, mean, mean
    rng = np.random.default_rng(seed)
    means = arr[rng.integers(0, len(arr), size=(resamples, len(arr)))].mean(axis=1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    return mean, float(lo), float(hi)


def verdict(lo: float, hi: float) -> str:
    """better / worse / not distinguishable, from the interval of B - A."""
    if lo > 0:
        return "better"
    if hi < 0:
        return "worse"
    return "not distinguishable"


def _metric(
    a: dict[str, dict[str, Any]],
    b: dict[str, dict[str, Any]],
    ids: list[str],
    name: str,
    resamples: int,
    lower_better: bool = False,
) -> dict[str, Any] | None:
    pairs = [
        (a[t][name], b[t][name])
        for t in ids
        if a[t].get(name) is not None and b[t].get(name) is not None
    ]
    if not pairs:
        return None
    mean, lo, hi = paired_interval([y - x for x, y in pairs], resamples)
    judged = verdict(-hi, -lo) if lower_better else verdict(lo, hi)
    return {
        "tasks": len(pairs),
        "a": sum(x for x, _ in pairs) / len(pairs),
        "b": sum(y for _, y in pairs) / len(pairs),
        "diff": mean,
        "ci_low": lo,
        "ci_high": hi,
        "verdict": judged,
    }


def compare(a_out: str, b_out: str, resamples: int = RESAMPLES) -> dict[str, Any]:
    """The comparison of eval B against eval A (the baseline)."""
    ma, a = read_scores(a_out)
    mb, b = read_scores(b_out)
    ids = sorted(set(a) & set(b))
    if not ids:
        raise CompareError(f"{a_out} and {b_out} share no scored task: nothing to compare")
    metrics = {name: _metric(a, b, ids, name, resamples) for name in METRICS}
    costs = {name: _metric(a, b, ids, name, resamples, lower_better=True) for name in COSTS}
    by_family: dict[str, list[str]] = defaultdict(list)
    for t in ids:
        by_family[a[t]["family"]].append(t)
    gained = [t for t in ids if a[t]["c"] == 0 and b[t]["c"] > 0]
    lost = [t for t in ids if a[t]["c"] > 0 and b[t]["c"] == 0]
    return {
        "a": {"output": a_out, "run_id": ma.get("run_id"), "model_id": ma.get("model_id")},
        "b": {"output": b_out, "run_id": mb.get("run_id"), "model_id": mb.get("model_id")},
        "tasks_paired": len(ids),
        "only_in_a": len(set(a) - set(b)),
        "only_in_b": len(set(b) - set(a)),
        "interval": f"paired 95% percentile bootstrap over tasks, {resamples} resamples, seed 0",
        "verdict": metrics["pass_at_1"]["verdict"]
        if metrics["pass_at_1"]
        else "not distinguishable",
        "metrics": metrics,
        "costs": costs,
        "by_family": {
            fam: _metric(a, b, members, "pass_at_1", resamples)
            for fam, members in sorted(by_family.items())
        },
        "flipped": {"gained": gained, "lost": lost},
    }


def render_compare(result: dict[str, Any]) -> str:
    """The comparison as plain text."""
    lines = [
        f"A: {result['a']['output']} ({result['a']['model_id']})",
        f"B: {result['b']['output']} ({result['b']['model_id']})",
        f"tasks paired: {result['tasks_paired']} (only in A: {result['only_in_a']}, "
        f"only in B: {result['only_in_b']}); {result['interval']}",
        f"verdict (pass@1): B is {result['verdict']} than A"
        if result["verdict"] != "not distinguishable"
        else "verdict (pass@1): not distinguishable",
        "",
        f"{'metric':<24}{'A':>8}{'B':>8}{'B - A':>9}  95% CI",
    ]
    rows = [(name, m) for name, m in result["metrics"].items()]
    rows += [(f"pass_at_1[{fam}]", m) for fam, m in result["by_family"].items()]
    rows += [(f"{name} (lower is better)", m) for name, m in result.get("costs", {}).items()]
    for name, m in rows:
        if m is None:
            continue
        lines.append(
            f"{name:<24}{m['a']:>8.3f}{m['b']:>8.3f}{m['diff']:>+9.3f}  "
            f"[{m['ci_low']:+.3f}, {m['ci_high']:+.3f}] {m['verdict']}"
        )
    flips = result["flipped"]
    lines.append(
        f"gained (solved by B only): {len(flips['gained'])} {', '.join(flips['gained'][:20])}"
    )
    lines.append(f"lost (solved by A only): {len(flips['lost'])} {', '.join(flips['lost'][:20])}")
    return "\n".join(lines)
