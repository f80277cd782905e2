"""``report.html``: one self-contained page describing a curate run, written into its output.

``write_report(out_dir)`` reads ``manifest.json`` and the Parquet shards of a curate output
(``pipeline.outputs.report.data``), draws the figures with matplotlib
(``pipeline.outputs.report.plots``,
imported here only when drawing) and renders the page (``pipeline.outputs.report.html``). The page
needs no network: styles are inline and figures are ``data:`` images. Without matplotlib the
page is written with its tables and a note instead of the figures. The file is written to a
temporary name and renamed, so a reader never sees half a page.
"""

from __future__ import annotations

import os
from pathlib import Path

from tasksieve.pipeline.outputs.layout import RunLayout
from tasksieve.pipeline.outputs.report.agent import agent_section
from tasksieve.pipeline.outputs.report.data import ReportData, gather
from tasksieve.pipeline.outputs.report.html import render

REPORT_NAME = "report.html"

__all__ = ["REPORT_NAME", "write_report"]


def draw(d: ReportData) -> tuple[dict[str, str | None], str]:
    """The figures as data URIs (None where there is nothing to draw), and a note if any."""
    from tasksieve.pipeline.outputs.report import plots

    try:
        kept = d.manifest.counts.get("kept", 0)
        band = d.manifest.config.get("band", {})
        return {
            "funnel": plots.funnel_figure(d.funnel, kept) if d.funnel[0].entered else None,
            "pass_rates": plots.pass_rate_figure(
                d.rates, float(band.get("too_hard", 0.0)), float(band.get("too_easy", 1.0))
            )
            if d.rates
            else None,
            "verdicts": plots.verdict_figure(d.verdicts) if d.verdicts else None,
        }, ""
    except plots.PlottingUnavailable as e:
        return {}, f"Figures left out: {e}."


def write_report(out_dir: Path, output: Path | None = None) -> Path:
    """Write the report of the curate output ``out_dir`` (default ``out_dir/report.html``).

    Raises ``NotAnOutput`` (``tasksieve.pipeline.outputs.layout``) when ``out_dir`` holds no
    readable tasksieve manifest.
    """
    out_dir = Path(out_dir)
    target = Path(output) if output is not None else out_dir / REPORT_NAME
    data = gather(out_dir)
    figs, note = draw(data)
    page = render(data, figs, note, agent_section(RunLayout.find(out_dir)))
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    try:
        tmp.write_text(page, encoding="utf-8")
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return target
