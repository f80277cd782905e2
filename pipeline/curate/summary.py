"""The end-of-run summary table printed by ``tasksieve curate``."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table

from tasksieve.schemas import Manifest


def short_samples_line(manifest: Manifest) -> str:
    """How many scored tasks got fewer samples than asked, and how many of them were kept."""
    c = manifest.counts
    short, kept = c.get("short_samples", 0), c.get("short_samples_kept", 0)
    asked = manifest.config.get("sampler", {}).get("samples", "K")
    if not short:
        return "0"
    return f"{short} got < {asked} samples ({kept} kept, scored on their real n)"


def render_summary(manifest: Manifest, output: Path | str, console: Console) -> None:
    c = manifest.counts
    head = Table(title=f"tasksieve curate — run {manifest.run_id}", show_header=False)
    head.add_column("what", style="bold")
    head.add_column("value", justify="right")
    for key in ("input", "kept", "rejected", "rollouts"):
        head.add_row(f"tasks {key}" if key != "rollouts" else "rollouts", str(c.get(key, 0)))
    head.add_row("tasks short of samples", short_samples_line(manifest))
    head.add_row("model", manifest.model_id)
    head.add_row("sandbox", str(manifest.sandbox.get("isolation", manifest.sandbox)))
    head.add_row("config fingerprint", manifest.config_fingerprint)
    console.print(head)

    reasons = Table(title="rejected, by reason")
    reasons.add_column("reason")
    reasons.add_column("count", justify="right")
    for reason, n in sorted(manifest.rejected_by_reason.items(), key=lambda kv: (-kv[1], kv[0])):
        reasons.add_row(reason, str(n))
    console.print(reasons)

    hist = Table(title="pass rate of scored tasks (kept + filtered)")
    hist.add_column("pass rate")
    hist.add_column("tasks", justify="right")
    hist.add_column("")
    total = max(1, max(manifest.pass_rate_histogram.values(), default=1))
    for label in ("0", "(0.0,0.2]", "(0.2,0.4]", "(0.4,0.6]", "(0.6,0.8]", "(0.8,1.0]", "1"):
        n = manifest.pass_rate_histogram.get(label, 0)
        hist.add_row(label, str(n), "█" * round(20 * n / total))
    console.print(hist)
    console.print(
        f"output: [bold]{output}[/bold]  "
        "(tasks/, rejected/, rollouts/, manifest.json, catalog.duckdb, report.html)",
        soft_wrap=True,
    )
    console.print(
        f"query:  tasksieve query {output} "
        '"select family, count(*), avg(pass_rate) from tasks group by 1"',
        soft_wrap=True,
        highlight=False,
    )
