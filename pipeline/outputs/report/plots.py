"""The report's figures, drawn with matplotlib (Agg) and returned as ``data:`` URIs of SVG.

matplotlib is imported inside ``pyplot()``, not at module import, so ``tasksieve`` commands
and the curate pipeline that never draw do not load it. Every figure is drawn from
aggregated counts (bars, not one mark per task), so its size does not grow with the run.
Text is kept as SVG text (not glyph paths) to keep the files small; the page shows each SVG
through an ``<img>``, where a browser runs no script, whatever a label contains.
"""

from __future__ import annotations

import base64
import io
import itertools
from collections.abc import Sequence
from typing import Any

from tasksieve.pipeline.outputs.report.data import STATUSES, FamilyRates, FunnelStep

MAX_PANELS = 8  # pass-rate panels (one per family); families past this are not drawn
BIN_WIDTH = 0.05
COLOURS = {
    "kept": "#2a9d8f",
    "filtered": "#b0b7c3",
    "rejected": "#e76f51",
    "band": "#f4d35e",
    "pass": "#2a9d8f",
    "fail": "#e76f51",
    "timeout": "#f4a261",
    "error": "#9d4edd",
    "infra_error": "#6c757d",
}


class PlottingUnavailable(RuntimeError):
    """matplotlib is not installed (install the ``report`` extra)."""


def pyplot() -> Any:
    """matplotlib's pyplot on the non-interactive Agg backend."""
    try:
        import matplotlib
    except ImportError as e:
        raise PlottingUnavailable(
            "matplotlib is not installed: pip install 'tasksieve[report]' for the figures"
        ) from e
    matplotlib.use("Agg", force=True)
    matplotlib.rcParams["svg.fonttype"] = "none"
    matplotlib.rcParams["svg.hashsalt"] = "tasksieve"  # same input, same bytes
    matplotlib.rcParams["text.parse_math"] = False  # a "$" in a label is just a dollar sign
    import matplotlib.pyplot as plt

    return plt


def to_data_uri(fig: Any) -> str:
    """Render ``fig`` as SVG into a ``data:image/svg+xml;base64,...`` URI and close it."""
    plt = pyplot()
    buf = io.BytesIO()
    try:
        fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    finally:
        plt.close(fig)
    return "data:image/svg+xml;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def funnel_figure(steps: Sequence[FunnelStep], kept: int) -> str:
    """Horizontal bars: records entering each stage, the part it rejected in another colour."""
    plt = pyplot()
    shown = [s for s in steps if s.entered or s.rejected]
    labels = [s.stage for s in shown] + ["kept"]
    left = [s.left for s in shown] + [kept]
    rejected = [s.rejected for s in shown] + [0]
    fig, ax = plt.subplots(figsize=(7.5, 0.45 * len(labels) + 1.0))
    ys = list(range(len(labels)))[::-1]
    ax.barh(ys, left, color=COLOURS["kept"], label="passed on")
    ax.barh(ys, rejected, left=left, color=COLOURS["rejected"], label="rejected here")
    for y, passed, rej in zip(ys, left, rejected, strict=True):
        ax.text(passed + rej, y, f"  {passed}" + (f" (-{rej})" if rej else ""), va="center")
    ax.set_yticks(ys, labels)
    ax.set_xlabel("records")
    ax.set_xlim(0, max(1, *(a + b for a, b in zip(left, rejected, strict=True))) * 1.25)
    ax.legend(loc="lower right", frameon=False)
    ax.spines[["top", "right"]].set_visible(False)
    return to_data_uri(fig)


def _bins() -> list[float]:
    """Bin edges centred on multiples of BIN_WIDTH, so 0 and 1 get bins of their own."""
    n = round(1 / BIN_WIDTH)
    return [(i - 0.5) * BIN_WIDTH for i in range(n + 2)]


def _count(values: Sequence[float], edges: Sequence[float]) -> list[int]:
    counts = [0] * (len(edges) - 1)
    for v in values:
        i = min(max(int((v - edges[0]) // BIN_WIDTH), 0), len(counts) - 1)
        counts[i] += 1
    return counts


def pass_rate_figure(rates: dict[str, FamilyRates], too_hard: float, too_easy: float) -> str:
    """One panel per family: kept and filtered tasks per pass-rate bin, the kept band shaded."""
    plt = pyplot()
    from matplotlib import ticker

    families = list(rates)[:MAX_PANELS]
    cols = min(2, len(families))
    rows = (len(families) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 2.6 * rows), squeeze=False)
    edges = _bins()
    centres = [(a + b) / 2 for a, b in itertools.pairwise(edges)]
    for ax, family in zip(axes.flat, families, strict=False):
        kept = _count(rates[family].kept, edges)
        filtered = _count(rates[family].filtered, edges)
        ax.axvspan(too_hard, too_easy, color=COLOURS["band"], alpha=0.25, lw=0, label="band")
        w = BIN_WIDTH * 0.9
        ax.bar(centres, kept, width=w, color=COLOURS["kept"], label="kept")
        ax.bar(centres, filtered, width=w, bottom=kept, color=COLOURS["filtered"], label="filtered")
        ax.set_title(
            f"{family} ({len(rates[family].kept)} kept / "
            f"{len(rates[family].kept) + len(rates[family].filtered)} scored)",
            fontsize=9,
        )
        ax.set_xlim(-0.05, 1.05)
        ax.set_xlabel("pass rate (k/n)")
        ax.set_ylabel("tasks")
        ax.yaxis.set_major_locator(ticker.MaxNLocator(integer=True))
        ax.spines[["top", "right"]].set_visible(False)
    for ax in list(axes.flat)[len(families) :]:
        ax.set_visible(False)
    axes.flat[0].legend(fontsize=8, frameon=False)
    fig.tight_layout()
    return to_data_uri(fig)


def verdict_figure(verdicts: dict[str, dict[str, int]]) -> str:
    """Stacked horizontal bars: each family's rollouts by verdict status."""
    plt = pyplot()
    families = list(verdicts)
    statuses = [s for s in STATUSES if any(s in v for v in verdicts.values())]
    statuses += sorted({s for v in verdicts.values() for s in v} - set(statuses))
    fig, ax = plt.subplots(figsize=(7.5, 0.45 * len(families) + 1.2))
    ys = list(range(len(families)))[::-1]
    start = [0] * len(families)
    for status in statuses:
        widths = [verdicts[f].get(status, 0) for f in families]
        ax.barh(ys, widths, left=start, color=COLOURS.get(status, "#adb5bd"), label=status)
        start = [a + b for a, b in zip(start, widths, strict=True)]
    ax.set_yticks(ys, families)
    ax.set_xlabel("rollouts")
    ax.legend(
        ncols=min(5, len(statuses)), loc="upper center", bbox_to_anchor=(0.5, -0.25), frameon=False
    )
    ax.spines[["top", "right"]].set_visible(False)
    return to_data_uri(fig)
