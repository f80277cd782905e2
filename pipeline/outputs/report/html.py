"""Render the gathered report data as one self-contained HTML page (inline CSS and images).

Every value from the run (prompts, completions, ids, families, reasons, details, config) is
escaped with ``html.escape`` where it is placed; the page has no script at all and declares a
Content-Security-Policy that forbids scripts and any fetch other than its own ``data:``
images, as a second line of defence. It does NOT hide what the data says: an offensive prompt
is shown (as text). Links are relative (the output directory is renamed when published).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from html import escape
from typing import Any

from tasksieve.pipeline.outputs.report.checks import Checks
from tasksieve.pipeline.outputs.report.data import HIST_LABELS, STAGES, STATUSES, ReportData, Sample

CSP = (
    "default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; "
    "form-action 'none'"
)
MAX_CHECK_ROWS = 300
CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1d232b;
background:#f6f7f9}
main{max-width:1100px;margin:0 auto;padding:1.2em 1.5em 3em}
h1{font-size:1.6em;margin:.2em 0}h2{border-bottom:2px solid #d9dee5;padding-bottom:.2em;
margin-top:2em}h3{margin-bottom:.3em}
nav a{margin-right:1em}
.cards{display:flex;gap:.8em;flex-wrap:wrap;margin:1em 0}
.card{background:#fff;border:1px solid #d9dee5;border-radius:6px;padding:.6em 1em;min-width:7em}
.card b{display:block;font-size:1.5em}
table{border-collapse:collapse;background:#fff;margin:.6em 0;font-size:13px}
th,td{border:1px solid #d9dee5;padding:.25em .6em;text-align:left;vertical-align:top}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
tr.total td{font-weight:600;background:#eef1f5}
img.fig{max-width:100%;background:#fff;border:1px solid #d9dee5;border-radius:6px}
pre{background:#fff;border:1px solid #d9dee5;border-radius:4px;padding:.5em;overflow:auto;
max-height:22em;white-space:pre-wrap;word-break:break-word;font-size:12px}
.sample{background:#fff;border:1px solid #d9dee5;border-radius:6px;padding:.6em 1em;margin:.8em 0}
.sample .cols{display:grid;grid-template-columns:1fr 1fr;gap:.8em}
.badge{display:inline-block;border-radius:3px;padding:0 .45em;color:#fff;font-weight:600}
.pass{background:#2a9d8f}.fail{background:#e76f51}.timeout{background:#f4a261}
.error{background:#9d4edd}.infra_error,.unknown{background:#6c757d}
.ok{color:#1e7b34}.bad{color:#b42318}.note{color:#5b6573}
.problem{background:#fff4e5;border:1px solid #f0b429;padding:.5em 1em;border-radius:6px}
"""


def e(value: Any) -> str:
    """Escape any value for HTML text and attributes."""
    return escape("" if value is None else str(value), quote=True)


def table(
    table_id: str,
    head: Sequence[str],
    rows: Iterable[Sequence[Any]],
    numeric: range | None = None,
    total: Sequence[Any] | None = None,
) -> str:
    """A table whose cells are escaped; ``numeric`` columns (default: all but the first) are
    right-aligned."""
    right = range(1, len(head)) if numeric is None else numeric

    def cells(tag: str, values: Sequence[Any]) -> str:
        return "".join(
            f"<{tag}{' class=n' if i in right else ''}>{e(v)}</{tag}>" for i, v in enumerate(values)
        )

    body = "".join(f"<tr>{cells('td', r)}</tr>" for r in rows)
    if total is not None:
        body += f'<tr class="total">{cells("td", total)}</tr>'
    return (
        f'<table id="{e(table_id)}"><thead><tr>{cells("th", head)}</tr></thead>'
        f"<tbody>{body}</tbody></table>"
    )


def figure(uri: str | None, alt: str, note: str) -> str:
    if uri is None:
        return f'<p class="note">{e(note)}</p>'
    return f'<p><img class="fig" src="{e(uri)}" alt="{e(alt)}"></p>'


def header(d: ReportData) -> str:
    m, c = d.manifest, d.manifest.counts
    cards = "".join(
        f'<div class="card" id="count-{e(k)}">{e(k)}<b>{e(c.get(k, 0))}</b></div>'
        for k in ("input", "kept", "rejected", "rollouts")
    )
    problems = "".join(f"<li>{e(p)}</li>" for p in d.problems)
    warn = (
        '<div class="problem"><b>The shards disagree with the manifest:</b>'
        f"<ul>{problems}</ul></div>"
    )
    return (
        f"<h1>tasksieve curate report</h1><p>run <code>{e(m.run_id)}</code> · "
        f"{e(m.created_at)} → {e(m.finished_at)} · config <code>{e(m.config_fingerprint)}</code>"
        f' · <a href="manifest.json">manifest.json</a></p><div class="cards">{cards}</div>'
        + (warn if d.problems else "")
        + '<nav><a href="#funnel">Funnel</a><a href="#pass-rates">Pass rates</a>'
        '<a href="#rollouts">Rollouts</a>'
        + ('<a href="#quality">Data quality</a>' if d.checks is not None else "")
        + '<a href="#config">Configuration</a></nav>'
    )


def funnel_section(d: ReportData, fig: str | None) -> str:
    rows = [
        (
            s.stage,
            s.entered,
            s.rejected,
            s.left,
            ", ".join(f"{r}: {n}" for r, n in s.reasons.items()),
        )
        for s in d.funnel
    ]
    kept = d.manifest.counts.get("kept", 0)
    steps = table(
        "funnel-table",
        ["stage", "entered", "rejected", "passed on", "rejected by reason"],
        rows,
        numeric=range(1, 4),
        total=["kept", kept, "", kept, ""],
    )
    stages = [s for s in STAGES if any(s in v for v in d.rejected_by_family.values())]
    stages += sorted({s for v in d.rejected_by_family.values() for s in v} - set(stages))
    families = sorted(set(d.rejected_by_family) | set(d.kept_by_family))
    fam_rows = []
    for f in families:
        rej = d.rejected_by_family.get(f, {})
        kept_f = d.kept_by_family.get(f, 0)
        fam_rows.append([f, *(rej.get(s, 0) for s in stages), kept_f, sum(rej.values()) + kept_f])
    by_family = (
        table(
            "family-table",
            ["family", *(f"rejected: {s}" for s in stages), "kept", "total"],
            fam_rows,
        )
        if fam_rows
        else '<p class="note">No records were read: the input was empty.</p>'
    )
    counters = table("stage-counters", ["counter", "value"], d.manifest.stage_counters.items())
    return (
        '<section id="funnel"><h2>Funnel: input to kept</h2>'
        + figure(fig, "records per stage", "No records were read: the input was empty.")
        + steps
        + "<h3>Per family</h3><p class=note>From the rows of rejected/ and tasks/ "
        "(a record that did not parse has no family).</p>"
        + by_family
        + f"<details><summary>Stage counters ({len(d.manifest.stage_counters)})</summary>"
        + counters
        + "</details></section>"
    )


def pass_rate_section(d: ReportData, fig: str | None) -> str:
    band = d.manifest.config.get("band", {})
    lo, hi = band.get("too_hard", "?"), band.get("too_easy", "?")
    asked = d.manifest.config.get("sampler", {}).get("samples", "?")
    rows, total = [], [0] * len(HIST_LABELS)
    for fam, r in d.rates.items():
        hist = r.histogram()
        total = [a + b for a, b in zip(total, hist.values(), strict=True)]
        scored = [*r.kept, *r.filtered]
        mean = f"{sum(scored) / len(scored):.3f}" if scored else ""
        rows.append([fam, len(scored), len(r.kept), len(r.filtered), mean, *hist.values()])
    body = (
        table(
            "pass-rate-table",
            ["family", "scored", "kept", "filtered", "mean", *HIST_LABELS],
            rows,
            total=[
                "all",
                sum(r[1] for r in rows),
                sum(r[2] for r in rows),
                sum(r[3] for r in rows),
                "",
                *total,
            ],
        )
        if rows
        else '<p class="note">No task was scored: every record was rejected before sampling.</p>'
    )
    return (
        '<section id="pass-rates"><h2>Pass rates per family</h2>'
        f'<p id="band">Difficulty band kept: <b>{e(lo)} &lt; pass rate &lt; {e(hi)}</b> '
        f"(a task at or below {e(lo)} is too hard, at or above {e(hi)} too easy; "
        f"{e(asked)} samples asked per task).</p>"
        + (figure(fig, "pass-rate distribution per family", "") if rows else "")
        + body
        + "</section>"
    )


def sample_block(s: Sample) -> str:
    return (
        f'<article class="sample"><b>{e(s.task_id)}</b> · sample {e(s.sample_index)} · '
        f'<span class="badge {e(s.status if s.status in STATUSES else "unknown")}">'
        f"{e(s.status)}</span> · tests {e(s.tests)}"
        f'<div class="note">{e(s.detail)}</div><div class="cols">'
        f"<div><b>prompt</b><pre>{e(s.prompt)}</pre></div>"
        f"<div><b>completion</b><pre>{e(s.completion)}</pre></div></div></article>"
    )


def rollout_section(d: ReportData, fig: str | None) -> str:
    if not d.verdicts:
        return (
            '<section id="rollouts"><h2>Rollouts</h2><p class="note">No rollouts: no task '
            "reached sampling (every record was rejected before it).</p></section>"
        )
    seen = {s for v in d.verdicts.values() for s in v}
    statuses = [s for s in STATUSES if s in seen] + sorted(seen - set(STATUSES))
    rows = [[f, *(v.get(s, 0) for s in statuses), sum(v.values())] for f, v in d.verdicts.items()]
    samples = ""
    for fam in dict.fromkeys(s.family for s in d.samples):
        samples += f"<h3>{e(fam)}</h3>" + "".join(
            sample_block(s) for s in d.samples if s.family == fam
        )
    return (
        '<section id="rollouts"><h2>Rollouts and verdicts</h2>'
        + figure(fig, "rollouts per family by verdict", "")
        + table("verdict-table", ["family", *statuses, "total"], rows)
        + "<h3>Sample rollouts</h3><p class=note>A few per family (one of each verdict first); "
        "prompts and completions are cut.</p>" + samples + "</section>"
    )


def checks_section(checks: Checks) -> str:
    if checks.error:
        return (
            '<section id="quality"><h2>Data quality</h2>'
            f'<p class="bad">{e(checks.error)}</p></section>'
        )
    failed = [r for r in checks.results if not r.success]
    verdict = {True: ("ok", "passed"), False: ("bad", "FAILED"), None: ("note", "unknown")}[
        checks.success
    ]
    ordered = sorted(checks.results, key=lambda r: r.success)[:MAX_CHECK_ROWS]
    rows = [
        [
            "pass" if r.success else "FAIL",
            r.suite,
            r.expectation,
            r.column if r.column is not None else "",
            "" if r.unexpected_count is None else r.unexpected_count,
            "" if r.element_count is None else r.element_count,
            r.detail,
        ]
        for r in ordered
    ]
    more = len(checks.results) - len(ordered)
    return (
        '<section id="quality"><h2>Data quality</h2>'
        f'<p id="checks-summary">Expectations <b class="{verdict[0]}">{verdict[1]}</b>: '
        f"{len(failed)} of {len(checks.results)} failed.</p>"
        + table(
            "checks-table",
            ["result", "suite", "expectation", "column", "unexpected rows", "rows", "detail"],
            rows,
            numeric=range(4, 6),
        )
        + (
            f'<p class="note">{more} more expectations (all passed) not listed.</p>'
            if more > 0
            else ""
        )
        + "</section>"
    )


def _json(value: Any) -> str:
    return f"<pre>{e(json.dumps(value, indent=2, sort_keys=True, default=str))}</pre>"


def config_section(d: ReportData) -> str:
    m = d.manifest
    facts = [
        ("run id", m.run_id),
        ("schema version", m.schema_version),
        ("config fingerprint", m.config_fingerprint),
        ("model", m.model_id),
        ("sampler", m.sampler),
        ("sandbox", m.sandbox.get("backend", "?")),
        ("isolation", m.sandbox.get("isolation", "?")),
        ("inputs", ", ".join(m.inputs)),
    ]
    return (
        '<section id="config"><h2>Run configuration</h2>'
        + table("config-facts", ["", ""], facts, numeric=range(0))
        + "<h3>Packages</h3>"
        + table("packages", ["package", "version"], sorted(m.packages.items()), numeric=range(0))
        + "<details><summary>Sandbox</summary>"
        + _json(m.sandbox)
        + "</details>"
        + "<details open><summary>Config</summary>"
        + _json(m.config)
        + "</details></section>"
    )


def render(d: ReportData, figs: dict[str, str | None], note: str = "", extra: str = "") -> str:
    """The whole page. ``figs`` maps funnel/pass_rates/verdicts to data URIs (None: not drawn);
    ``extra`` is more sections' HTML, before the config (agent runs)."""
    extra = f'<p class="note" id="figures-note">{e(note)}</p>' if note else ""
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>tasksieve run {e(d.manifest.run_id)}</title><style>{CSS}</style></head>"
        "<body><main>"
        + header(d)
        + extra
        + funnel_section(d, figs.get("funnel"))
        + pass_rate_section(d, figs.get("pass_rates"))
        + rollout_section(d, figs.get("verdicts"))
        + (checks_section(d.checks) if d.checks is not None else "")
        + extra
        + config_section(d)
        + "</main></body></html>\n"
    )
