"""``report.html`` of an eval: the summary's tables and a pass@k figure, one self-contained page.

Built from ``summary.json`` and ``manifest.json`` with the curate report's pieces
(``pipeline.outputs.report``: its stylesheet, its script-free Content-Security-Policy, its
escaping table helper and its matplotlib set-up). Every value is escaped where it is placed.
Without matplotlib the page is written with its tables and a note instead of the figure.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tasksieve.pipeline.outputs.report.html import CSP, CSS, e, figure, table

REPORT = "report.html"
GROUPINGS = (
    ("family", "Per family"),
    ("bucket", "Per difficulty bucket"),
    ("source", "Per source"),
)


def _pct(entry: dict[str, Any]) -> str:
    if entry["value"] is None:
        return f"- ({entry['short']} tasks short of k)"
    return f"{100 * entry['value']:.1f} [{100 * entry['ci_low']:.1f}, {100 * entry['ci_high']:.1f}]"


def _num(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _rows(groups: dict[str, dict[str, Any]], ks: list[int]) -> list[list[str]]:
    rows = []
    for name, g in groups.items():
        fails = ", ".join(f"{k} {v}" for k, v in g["failures"].items() if v) or "-"
        rows.append(
            [name, str(g["tasks"]), str(g["samples"]), str(g["solved_tasks"])]
            + [_pct(g["pass_at_k"][str(k)]) for k in ks]
            + [_num(g["reward"]["mean"]), _num(g["reward"]["style_penalty"]), fails]
        )
    return rows


def pass_figure(summary: dict[str, Any]) -> str | None:
    """pass@k per family with its interval, as a ``data:`` SVG (None: nothing to draw)."""
    from tasksieve.pipeline.outputs.report.plots import pyplot, to_data_uri

    fams = summary["by_family"]
    ks = summary["ks"]
    if not fams:
        return None
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 3.2))
    width = 0.8 / len(ks)
    for j, k in enumerate(ks):
        xs, ys, lo, hi = [], [], [], []
        for i, g in enumerate(fams.values()):
            entry = g["pass_at_k"][str(k)]
            if entry["value"] is None:
                continue
            xs.append(i + j * width)
            ys.append(entry["value"])
            # an interval from resampled means can miss the point estimate by a rounding step
            lo.append(max(0.0, entry["value"] - entry["ci_low"]))
            hi.append(max(0.0, entry["ci_high"] - entry["value"]))
        ax.bar(xs, ys, width, yerr=[lo, hi], capsize=3, label=f"pass@{k}")
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(fams))], list(fams))
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("pass@k (95% CI)")
    ax.legend(loc="upper right", fontsize=8)
    return to_data_uri(fig)


def render(summary: dict[str, Any], manifest: dict[str, Any], fig: str | None, note: str) -> str:
    ks: list[int] = summary["ks"]
    head = ["group", "tasks", "samples", "solved"] + [f"pass@{k} % [95% CI]" for k in ks]
    head += ["reward", "style penalty", "failures"]
    parts = [
        f"<h1>tasksieve eval report</h1><p>run <code>{e(manifest['run_id'])}</code> · model "
        f"<code>{e(manifest['model_id'])}</code> · sampler {e(manifest['sampler'])} · "
        f'<a href="manifest.json">manifest.json</a> · <a href="summary.json">summary.json</a></p>',
        f'<p class="note">Intervals: {e(summary["interval"])}.</p>',
        figure(fig, "pass@k per family", note or "No figure."),
        "<h2>Overall</h2>",
        table("overall", head, _rows({"all tasks": summary["overall"]}, ks)),
    ]
    for key, title in GROUPINGS:
        parts += [f"<h2>{e(title)}</h2>", table(key, head, _rows(summary[f"by_{key}"], ks))]
    turns = summary["overall"]["success_by_turn"]
    unit = summary.get("agent", {}).get("success_by", "turn")
    if len(turns) > 1:
        rows = [
            [str(t["turn"]), f"{100 * t['success']:.1f}", f"{100 * t['ci_low']:.1f}",
             f"{100 * t['ci_high']:.1f}"]
            for t in turns
        ]  # fmt: skip
        parts += [f"<h2>Success by {unit}</h2>", table("turns", [unit, "%", "low", "high"], rows)]
    if "agent" in summary:
        ends = [[e(k), str(v)] for k, v in summary["agent"]["endings"].items()]
        parts += ["<h2>Episode endings</h2>", table("endings", ["ending", "episodes"], ends)]
    cost = []
    for name in ("sandbox_s", "sandbox_cpu_s", "completion_tokens"):
        c = summary["overall"].get(name)
        if c is None:
            continue
        seen = f"{c['measured']} of {c['verdicts']}" if "measured" in c else "-"
        cost.append([name, _num(c["total"]), _num(c["per_task"]), _num(c["per_solved_task"]),
                     _num(c["per_passing_sample"]), seen])  # fmt: skip
    head_cost = ["cost", "total", "per task", "per solved task", "per passing sample", "measured"]
    parts += ["<h2>Cost</h2>", table("cost", head_cost, cost)]
    body = "".join(parts)
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{e(CSP)}">'
        f"<title>tasksieve eval {e(manifest['run_id'])}</title><style>{CSS}</style></head>"
        f"<body><main>{body}</main></body></html>\n"
    )


def write_report(out_dir: Path, summary: dict[str, Any], manifest: dict[str, Any]) -> Path:
    """Write ``out_dir/report.html`` (to a temporary name, then renamed)."""
    from tasksieve.pipeline.outputs.report.plots import PlottingUnavailable

    try:
        fig, note = pass_figure(summary), ""
    except PlottingUnavailable as exc:
        fig, note = None, f"Figure left out: {exc}."
    target = out_dir / REPORT
    tmp = out_dir / f".{REPORT}.tmp-{os.getpid()}"
    tmp.write_text(render(summary, manifest, fig, note), encoding="utf-8")
    os.replace(tmp, target)
    return target
