"""The text summary of an eval printed by ``tasksieve eval`` (one table per grouping)."""

from __future__ import annotations

from typing import Any


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}"


def _passk(entry: dict[str, Any]) -> str:
    if entry["value"] is None:
        return f"- ({entry['short']} short)"
    return f"{_pct(entry['value'])} [{_pct(entry['ci_low'])}, {_pct(entry['ci_high'])}]"


def _row(name: str, group: dict[str, Any], ks: list[int]) -> str:
    fails = group["failures"]
    cells = [name.ljust(18), str(group["tasks"]).rjust(5), str(group["samples"]).rjust(7)]
    cells += [_passk(group["pass_at_k"][str(k)]).ljust(22) for k in ks]
    reward = group["reward"]["mean"]
    cells.append("-" if reward is None else f"{reward:.3f}")
    cells.append(" ".join(f"{k}={v}" for k, v in fails.items() if v))
    return "  ".join(cells)


def render_text(summary: dict[str, Any], output: str) -> str:
    """The summary as plain-text tables: overall, by family, by bucket, by source."""
    ks: list[int] = summary["ks"]
    head = ["group".ljust(18), "tasks".rjust(5), "samples".rjust(7)]
    head += [f"pass@{k} % [95% CI]".ljust(22) for k in ks] + ["reward", "failures"]
    lines = [f"eval written to {output}", f"intervals: {summary['interval']}", ""]
    lines.append("  ".join(head))
    lines.append(_row("overall", summary["overall"], ks))
    for grouping in ("family", "bucket", "source"):
        lines.append(f"-- by {grouping}")
        for name, group in summary[f"by_{grouping}"].items():
            lines.append(_row(name, group, ks))
    turns = summary["overall"]["success_by_turn"]
    unit = summary.get("agent", {}).get("success_by", "turn")
    if len(turns) > 1:
        lines.append(f"-- success by {unit} (share of samples passed by then)")
        for t in turns:
            lines.append(
                f"{unit} {t['turn']}: {_pct(t['success'])}% "
                f"[{_pct(t['ci_low'])}, {_pct(t['ci_high'])}]"
            )
    if "agent" in summary:
        ends = summary["agent"]["endings"]
        lines.append("episode endings: " + ", ".join(f"{k} {v}" for k, v in ends.items()))
    cost = summary["overall"]["sandbox_s"]
    tokens = summary["overall"]["completion_tokens"]
    lines.append(
        f"sandbox seconds: {cost['total'] or 0:.2f} total, per task {cost['per_task'] or 0:.3f}, "
        f"per solved task {_num(cost['per_solved_task'])}"
    )
    cpu = summary["overall"].get("sandbox_cpu_s")
    if cpu is not None:
        lines.append(
            f"sandbox CPU seconds: {_num(cpu['total'])} total, per task {_num(cpu['per_task'])}, "
            f"per solved task {_num(cpu['per_solved_task'])} "
            f"({cpu['measured']} of {cpu['verdicts']} verdicts measured)"
        )
    lines.append(
        f"completion tokens: total {_num(tokens['total'])}, per task {_num(tokens['per_task'])}, "
        f"per solved task {_num(tokens['per_solved_task'])}"
    )
    return "\n".join(lines)


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"
