"""``report.html``: numbers equal the manifest and the shards, hostile text stays text,
empty runs and checks.json render, the ``tasksieve report`` command, and a real browser."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tasksieve.pipeline.cli import main
from tasksieve.pipeline.outputs.report.data import MAX_FAMILIES
from tasksieve.pipeline.outputs.report.page import write_report
from tests.pipeline.report_fixtures import (
    make_run,
    mixed_run,
    rejected,
    rollout,
    task,
)

ROOT = Path(__file__).resolve().parents[2]


class Page(HTMLParser):
    """Tags with their attributes, the text, and the cells of every table by id."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.tables: dict[str, list[list[str]]] = {}
        self._table: str | None = None
        self._cell: list[str] | None = None
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag == "table":
            self._table = dict(attrs).get("id") or ""
            self.tables[self._table] = []
        elif tag == "tr" and self._table is not None:
            self.tables[self._table].append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None and self._table is not None:
            self.tables[self._table][-1].append("".join(self._cell))
            self._cell = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        if self._cell is not None:
            self._cell.append(data)

    def rows(self, table_id: str) -> dict[str, list[str]]:
        """Body rows of a table keyed by their first cell (the header row left out)."""
        return {r[0]: r[1:] for r in self.tables[table_id][1:]}

    def header(self, table_id: str) -> list[str]:
        return self.tables[table_id][0]


def report(out: Path) -> Page:
    return Page(write_report(out).read_text(encoding="utf-8"))


def column(out: Path, sub: str, name: str) -> list[Any]:
    values: list[Any] = []
    for f in sorted((out / sub).rglob("*.parquet")):
        values.extend(pq.read_table(f, columns=[name]).column(name).to_pylist())
    return values


@pytest.fixture
def mixed(tmp_path: Path) -> Path:
    return mixed_run(tmp_path / "out")


def test_report_is_written_into_the_output_directory(mixed: Path) -> None:
    path = write_report(mixed)
    assert path == mixed / "report.html"
    assert path.read_text(encoding="utf-8").startswith("<!doctype html>")
    assert [p.name for p in mixed.iterdir() if p.name.startswith(".")] == []  # no temp file


def test_funnel_counts_equal_the_manifest(mixed: Path) -> None:
    manifest = json.loads((mixed / "manifest.json").read_text())
    page = report(mixed)
    rows = page.rows("funnel-table")
    stages = [r for r in rows if r != "kept"]
    assert int(rows[stages[0]][0]) == manifest["counts"]["input"]
    assert sum(int(rows[s][1]) for s in stages) == manifest["counts"]["rejected"]
    assert int(rows["kept"][0]) == int(rows[stages[-1]][2]) == manifest["counts"]["kept"]
    for s in stages:  # each stage passes on what it received less what it rejected
        entered, rej, left = (int(v) for v in rows[s][:3])
        assert left == entered - rej
    listed: Counter[str] = Counter()
    for s in stages:
        for part in filter(None, rows[s][3].split(", ")):
            reason, n = part.rsplit(": ", 1)
            listed[reason] += int(n)
    assert dict(listed) == manifest["rejected_by_reason"]
    assert rows["validate"][1] == "2" and rows["filter"][1] == "4"


def test_count_cards_equal_the_manifest(mixed: Path) -> None:
    manifest = json.loads((mixed / "manifest.json").read_text())
    html = write_report(mixed).read_text(encoding="utf-8")
    for key in ("input", "kept", "rejected", "rollouts"):
        found = re.search(rf'id="count-{key}">{key}<b>(\d+)</b>', html)
        assert found and int(found.group(1)) == manifest["counts"][key]


def _label(rate: float) -> str:
    """The manifest's pass-rate bin, computed here independently."""
    if rate == 0:
        return "0"
    if rate == 1:
        return "1"
    for i in range(1, 6):
        if rate <= i / 5 + 1e-12:
            return f"({(i - 1) / 5:.1f},{i / 5:.1f}]"
    raise AssertionError(rate)


def test_pass_rate_counts_per_family_equal_the_parquet_data(mixed: Path) -> None:
    page = report(mixed)
    header = page.header("pass-rate-table")
    rows = page.rows("pass-rate-table")
    kept = list(
        zip(column(mixed, "tasks", "family"), column(mixed, "tasks", "pass_rate"), strict=True)
    )
    filtered = [
        (f, r)
        for f, r in zip(
            column(mixed, "rejected", "family"), column(mixed, "rejected", "pass_rate"), strict=True
        )
        if r is not None
    ]
    families = sorted({f for f, _ in kept + filtered})
    assert [r for r in rows if r != "all"] == families
    for fam in families:
        cells = dict(zip(header[1:], rows[fam], strict=True))
        k = [r for f, r in kept if f == fam]
        x = [r for f, r in filtered if f == fam]
        assert (int(cells["scored"]), int(cells["kept"]), int(cells["filtered"])) == (
            len(k) + len(x),
            len(k),
            len(x),
        )
        want = Counter(_label(r) for r in k + x)
        assert {h: int(cells[h]) for h in header[5:]} == {h: want.get(h, 0) for h in header[5:]}
    total = dict(zip(header[1:], rows["all"], strict=True))
    manifest = json.loads((mixed / "manifest.json").read_text())
    assert {h: int(total[h]) for h in header[5:] if int(total[h])} == manifest[
        "pass_rate_histogram"
    ]


def test_band_of_the_run_is_shown(tmp_path: Path) -> None:
    out = make_run(tmp_path / "out", [task("code.a", "code", 1)], [], [], band=(0.1, 0.9))
    page = report(out)
    band = next(i for i, (t, a) in enumerate(page.tags) if a.get("id") == "band")
    assert band >= 0
    assert "0.1 < pass rate < 0.9" in "".join(page.text)


def test_per_family_rejections_equal_the_rejected_rows(mixed: Path) -> None:
    page = report(mixed)
    header = page.header("family-table")
    rows = page.rows("family-table")
    fams = column(mixed, "rejected", "family")
    stages = column(mixed, "rejected", "stage")
    want = Counter(((f or "(unparsed)"), s) for f, s in zip(fams, stages, strict=True))
    kept = Counter(column(mixed, "tasks", "family"))
    for fam, cells in rows.items():
        by_col = dict(zip(header[1:], cells, strict=True))
        for col, value in by_col.items():
            if col.startswith("rejected: "):
                assert int(value) == want.get((fam, col.removeprefix("rejected: ")), 0)
        assert int(by_col["kept"]) == kept.get(fam, 0)
    assert set(rows) == {f for f, _ in want} | set(kept)


def test_verdict_counts_equal_the_rollouts(mixed: Path) -> None:
    page = report(mixed)
    header = page.header("verdict-table")
    table = pq.read_table(mixed / "rollouts", columns=["family", "verdict"]).to_pylist()
    want = Counter((r["family"], r["verdict"]["status"]) for r in table)
    for fam, cells in page.rows("verdict-table").items():
        for status, value in zip(header[1:-1], cells, strict=False):
            assert int(value) == want.get((fam, status), 0)


def test_samples_show_each_verdict_status(mixed: Path) -> None:
    page = report(mixed)
    classes = [a.get("class") or "" for t, a in page.tags if t == "span"]
    badges = [c for c in classes if c.startswith("badge ")]
    statuses = Counter(b.split()[1] for b in badges)
    assert len(badges) == 8  # 4 per family, 2 families, each family has all 5 statuses
    assert max(statuses.values()) == 2  # so each family shows 4 different ones


def test_samples_prefer_different_tasks(mixed: Path) -> None:
    html = write_report(mixed).read_text(encoding="utf-8")
    shown = re.findall(r'<article class="sample"><b>([^<]*)</b>', html)
    code = [t for t in shown if t.startswith("code.")]
    assert len(code) == 4 and len(set(code)) == 4  # code has 4 tasks with rollouts


@pytest.mark.parametrize("where", ["kept", "filtered"])
def test_sample_shows_its_task_prompt(tmp_path: Path, where: str) -> None:
    """A kept task's prompt comes from tasks/, a filtered one's from rejected/ raw."""
    prompt = f"Prompt of the {where} task."
    tasks = [task("code.a", "code", 2, prompt=prompt)] if where == "kept" else []
    rejects = (
        [rejected("code.a", "code", "filter", "filter.too_hard", k=0, prompt=prompt)]
        if where == "filtered"
        else []
    )
    out = make_run(tmp_path / "out", tasks, rejects, [rollout("code.a", "code", 0, "fail")])
    assert prompt in report(out).text


def test_unknown_reason_gets_its_own_stage_and_the_funnel_still_ends_at_kept(
    tmp_path: Path,
) -> None:
    rejects = [rejected("code.x", "code", "reward_model", "reward.too_long")]
    out = make_run(tmp_path / "out", [task("code.a", "code", 1)], rejects, [])
    rows = report(out).rows("funnel-table")
    assert rows["reward_model"][:3] == ["2", "1", "1"] and rows["kept"][0] == "1"


def test_disagreement_between_manifest_and_shards_is_shown(mixed: Path) -> None:
    manifest = json.loads((mixed / "manifest.json").read_text())
    manifest["counts"]["kept"] += 5
    (mixed / "manifest.json").write_text(json.dumps(manifest))
    text = "".join(report(mixed).text)
    assert "The shards disagree with the manifest" in text
    assert f"manifest kept {manifest['counts']['kept']}" in text


def test_consistent_run_shows_no_disagreement(mixed: Path) -> None:
    assert "disagree" not in "".join(report(mixed).text)


def test_many_bogus_families_are_summed_into_one_row(tmp_path: Path) -> None:
    rejects = [rejected(f"f{i}.x", f"fam{i:03}", "validate", "validate.schema") for i in range(100)]
    out = make_run(tmp_path / "out", [task("code.a", "code", 1)], rejects, [])
    rows = report(out).rows("family-table")
    shown = [f for f in rows if f.startswith("fam")]
    assert len(shown) == MAX_FAMILIES and "code" in rows  # the kept family is always listed
    assert rows["(other families)"][-1] == str(100 - MAX_FAMILIES)  # its total column


HOSTILE = [
    "</script><script>alert(1)</script>",
    '<img src=x onerror="alert(1)">',
    '"><svg onload=alert(1)>',
    "</pre></article><iframe src='javascript:alert(1)'></iframe>",
    "<!-- --><style>body{display:none}</style>",
    "&lt;b&gt;already escaped&lt;/b&gt; $x$ \u202e\u0000",
]


@pytest.mark.parametrize("hostile", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_text_is_shown_as_text_never_as_markup(tmp_path: Path, hostile: str) -> None:
    tid = f"code.{hostile}"
    out = make_run(
        tmp_path / "out",
        [task(tid, "code", 2, prompt=f"Write f. {hostile}")],
        [rejected(hostile, hostile, "validate", hostile)],
        [rollout(tid, "code", 0, "fail", completion=hostile, detail=hostile)],
    )
    (out / "checks.json").write_text(
        json.dumps(
            {
                "success": False,
                "results": [
                    {
                        "suite": hostile,
                        "expectation": hostile,
                        "column": hostile,
                        "success": False,
                        "unexpected_count": 1,
                        "element_count": 1,
                        "detail": hostile,
                    }
                ],
            }
        )
    )
    page = report(out)
    tags = {t for t, _ in page.tags}
    assert not tags & {"script", "iframe", "svg", "object", "embed", "base", "form"}
    assert [t for t, _ in page.tags].count("style") == 1  # the page's own stylesheet only
    for tag, attrs in page.tags:
        assert not [a for a in attrs if a.startswith("on")], (tag, attrs)
        if tag == "img":
            assert (attrs.get("src") or "").startswith("data:image/svg+xml;base64,")
        if tag == "a":
            href = attrs.get("href") or ""
            assert href == "manifest.json" or href.startswith("#")
    text = "".join(page.text)
    shown = hostile.replace("\u0000", "\ufffd")  # the parser turns NUL into U+FFFD
    assert f"Write f. {shown}" in text or f"Write f. {hostile}" in text
    assert text.count(hostile.split("\u0000")[0]) >= 4  # prompt, completion, id, checks...


def test_page_forbids_scripts_by_policy(mixed: Path) -> None:
    page = report(mixed)
    csp = [
        a.get("content") or ""
        for t, a in page.tags
        if a.get("http-equiv") == "Content-Security-Policy"
    ]
    assert csp and "default-src 'none'" in csp[0] and "script-src" not in csp[0]


@pytest.mark.parametrize(
    "shape",
    ["all_rejected_at_validate", "nothing_read"],
)
def test_empty_run_says_so(tmp_path: Path, shape: str) -> None:
    rejects = (
        [rejected(None, None, "validate", "validate.parse_error")]
        if shape == "all_rejected_at_validate"
        else []
    )
    out = make_run(tmp_path / "out", [], rejects, [])
    page = report(out)
    text = " ".join(page.text)
    assert "No rollouts" in text
    assert "No task was scored" in text
    assert "pass-rate-table" not in page.tables and "verdict-table" not in page.tables
    assert page.rows("funnel-table")["kept"][0] == "0"


def test_empty_run_without_shard_directories(tmp_path: Path) -> None:
    out = make_run(tmp_path / "out", [], [], [])
    for sub in ("tasks", "rejected", "rollouts"):
        shutil.rmtree(out / sub)
    assert "No rollouts" in " ".join(report(out).text)


CHECKS: dict[str, Any] = {
    "success": False,
    "results": [
        {
            "suite": "tasks",
            "expectation": "expect_column_values_to_not_be_null",
            "column": "id",
            "success": True,
            "unexpected_count": 0,
            "element_count": 12,
            "detail": "",
        },
        {
            "suite": "tasks",
            "expectation": "expect_column_values_to_be_between",
            "column": "pass_rate",
            "success": False,
            "unexpected_count": 3,
            "element_count": 12,
            "detail": "3 rows outside [0, 1]",
        },
        {
            "suite": "rollouts",
            "expectation": "expect_table_row_count_to_be_between",
            "column": None,
            "success": False,
            "unexpected_count": None,
            "element_count": None,
            "detail": "0 rows",
        },
    ],
}


def test_checks_json_failures_are_listed_first_with_their_row_counts(mixed: Path) -> None:
    (mixed / "checks.json").write_text(json.dumps(CHECKS))
    page = report(mixed)
    rows = page.tables["checks-table"][1:]
    assert [r[0] for r in rows] == ["FAIL", "FAIL", "pass"]
    failed = {r[2]: r for r in rows if r[0] == "FAIL"}
    assert failed["expect_column_values_to_be_between"][3:6] == ["pass_rate", "3", "12"]
    assert failed["expect_table_row_count_to_be_between"][3:6] == ["", "", ""]
    assert "FAILED: 2 of 3 failed" in "".join(page.text)


def test_checks_json_all_passed(mixed: Path) -> None:
    ok = {"success": True, "results": [dict(CHECKS["results"][0])]}
    (mixed / "checks.json").write_text(json.dumps(ok))
    assert "passed: 0 of 1 failed" in "".join(report(mixed).text)


@pytest.mark.parametrize("body", ["{not json", "[]", '{"success": true}', '{"results": 5}'])
def test_unreadable_checks_json_is_reported_not_raised(mixed: Path, body: str) -> None:
    (mixed / "checks.json").write_text(body)
    page = report(mixed)
    assert "checks.json could not be read" in "".join(page.text)
    assert "funnel-table" in page.tables


def test_no_quality_section_without_checks_json(mixed: Path) -> None:
    page = report(mixed)
    assert not [a for _, a in page.tags if a.get("id") == "quality"]


def test_large_run_gives_a_bounded_page(tmp_path: Path) -> None:
    n = 1500
    tasks = [task(f"code.t{i}", "code", 1 + i % 3, prompt="p" * 5000) for i in range(n)]
    rollouts = [
        rollout(f"code.t{i}", "code", j, "pass" if j <= i % 3 else "fail", completion="c" * 5000)
        for i in range(n)
        for j in range(4)
    ]
    out = make_run(tmp_path / "out", tasks, [], rollouts)
    path = write_report(out)
    page = Page(path.read_text(encoding="utf-8"))
    assert path.stat().st_size < 1_000_000
    assert sum(1 for t, a in page.tags if t == "article") == 4  # per family, not per task
    assert page.rows("pass-rate-table")["code"][0] == str(n)


def test_importing_the_report_does_not_load_matplotlib() -> None:
    code = (
        "import sys, tasksieve.pipeline.outputs.report.page, tasksieve.pipeline.curate.run; "
        "print('matplotlib' in sys.modules)"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    assert done.stdout.strip() == "False"


def test_without_matplotlib_the_page_keeps_its_tables(mixed: Path) -> None:
    code = (
        "import sys; sys.modules['matplotlib'] = None\n"
        "from pathlib import Path\n"
        "from tasksieve.pipeline.outputs.report.page import write_report\n"
        f"write_report(Path({str(mixed)!r}))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=300)
    page = Page((mixed / "report.html").read_text(encoding="utf-8"))
    assert not [t for t, _ in page.tags if t == "img"]
    assert "tasksieve[report]" in "".join(page.text)
    assert "funnel-table" in page.tables


def test_cli_report_writes_the_page(mixed: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(mixed)]) == 0
    assert capsys.readouterr().out.strip() == str(mixed / "report.html")
    assert (mixed / "report.html").is_file()


def test_cli_report_output_flag(mixed: Path, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.html"
    assert main(["report", str(mixed), "--output", str(target)]) == 0
    assert target.is_file() and not (mixed / "report.html").exists()


@pytest.mark.parametrize("what", ["missing", "not_a_run", "bad_manifest", "a_file"])
def test_cli_report_refuses_what_is_not_a_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], what: str
) -> None:
    target = tmp_path / "dir"
    if what != "missing":
        target.mkdir()
        (target / "notes.txt").write_text("hello")
    if what == "bad_manifest":
        (target / "manifest.json").write_text('{"run_id": 1}')
    if what == "a_file":
        target = target / "notes.txt"
    assert main(["report", str(target)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tasksieve report: error: ") and str(target) in err
    assert not (tmp_path / "dir" / "report.html").exists()


# --- a real browser -------------------------------------------------------------------------

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def chromium(*args: str) -> subprocess.CompletedProcess[str]:
    flags = ["--headless", "--disable-gpu", "--hide-scrollbars", "--enable-logging=stderr", "--v=0"]
    if os.geteuid() == 0:  # chromium refuses to run as root with its sandbox on
        flags.append("--no-sandbox")
    return subprocess.run(
        [CHROMIUM or "chromium", *flags, *args], capture_output=True, text=True, timeout=120
    )


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_headless_chromium_renders_the_page_without_errors(tmp_path: Path) -> None:
    image = pytest.importorskip("matplotlib.image")
    hostile = (
        '</script><script>console.error("INJECTED")</script><img src=x onerror="console.error(1)">'
    )
    out = make_run(
        tmp_path / "out",
        [task("code.a", "code", 2, prompt=hostile), task("sql.a", "sql", 1)],
        [rejected("code.hard", "code", "filter", "filter.too_hard", k=0)],
        [
            rollout("code.a", "code", i, ("pass", "fail")[i % 2], completion=hostile)
            for i in range(4)
        ],
    )
    url = write_report(out).as_uri()
    shot = tmp_path / "shot.png"
    done = chromium(f"--screenshot={shot}", "--window-size=1200,1800", url)
    assert shot.is_file(), done.stderr[-2000:]
    pixels = image.imread(shot)
    assert pixels.shape[:2] == (1800, 1200)
    gray = pixels[..., :3].mean(axis=2)
    assert gray.std() > 0.05  # not a blank page
    assert (gray < 0.5).mean() > 0.005  # some dark text and bars are drawn

    dom = chromium("--dump-dom", url)
    assert dom.returncode == 0, dom.stderr[-2000:]
    rendered = Page(dom.stdout)
    assert "funnel-table" in rendered.tables and "pass-rate-table" in rendered.tables
    assert not [t for t, _ in rendered.tags if t == "script"]
    assert all((a.get("src") or "").startswith("data:") for t, a in rendered.tags if t == "img")
    console = [ln for ln in done.stderr.splitlines() + dom.stderr.splitlines() if "CONSOLE" in ln]
    assert console == []  # no script ran, nothing was refused by the page's policy

    control = tmp_path / "control.html"  # the same capture does see a script error
    control.write_text("<!doctype html><p>x</p><script>console.error('seen')</script>")
    assert "CONSOLE" in chromium("--dump-dom", control.as_uri()).stderr
