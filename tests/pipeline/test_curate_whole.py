"""End to end: `tasksieve curate` keeps what users gave and says when samples fall short.

One run over every example, each record padded past 100 KB (metadata, plus every source
field), with a replay file that gives one kept task 3 of 4 samples, one filtered task 1 of 4
and one task none. Checks: every rejected row's ``raw`` is its input line, byte for byte,
for every stage that rejects; every kept row gives back its input TaskRecord; the shortfall
is in the rows, the counters, the manifest and the summary.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from rich.console import Console

from tasksieve.pipeline.cli import main
from tasksieve.pipeline.curate.summary import render_summary
from tasksieve.schemas import CuratedTask, Manifest, TaskRecord
from tasksieve.transforms.algorithms.stats import wilson_interval
from tests.curate_flags import FAST

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "tasks"
REPLAY = ROOT / "examples" / "replay" / "completions.jsonl"
PAD = "é→∑😀 " + "x" * 100_000
K = 4
SHORT_KEPT = "code.unique_sorted"  # 2 of 3 samples pass: kept on n = 3
SHORT_FILTERED = "code.add"  # 1 of 1 passes: too easy on n = 1
NO_SAMPLES = "code.word_frequencies"


def _pad(line: str, n: int) -> str:
    """The line with 100 KB of metadata and every source field (malformed lines too)."""
    try:
        rec = json.loads(line)
    except json.JSONDecodeError:
        return '{"padding": "' + PAD + '", ' + line[1:]
    meta = rec.get("metadata")
    rec["metadata"] = {
        **(meta if isinstance(meta, dict) else {}),
        "padding": PAD,
        "n": n,
        "nested": [{"a": None}, 1.5],
    }
    source = rec.get("source")
    rec["source"] = {
        **(source if isinstance(source, dict) else {}),
        "url": f"https://example.org/{n}",
        "author": "Zoë",
    }
    return json.dumps(rec, ensure_ascii=False)


def _extra_lines() -> list[str]:
    """A duplicate id and a mistyped number, both otherwise valid copies of code.add."""
    add = json.loads((EXAMPLES / "code.jsonl").read_text().splitlines()[0])
    dup = {**add, "prompt": "Write `add(a, b)` returning a + b, for integers only."}
    typed = {**add, "id": "code.add_typed", "prompt": "Write add(a, b) (typed timeout)."}
    typed["verifier"] = {**add["verifier"], "timeout_s": "600"}
    return [json.dumps(dup), json.dumps(typed)]


def _reference_completion(task_id: str) -> str:
    for line in (EXAMPLES / "code.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if rec["id"] == task_id:
            return "```python\n" + rec["reference_solution"] + "```\n"
    raise KeyError(task_id)


def _replay(path: Path) -> None:
    rows = [
        json.loads(line)
        for line in REPLAY.read_text().splitlines()
        if line.strip()
        and json.loads(line)["task_id"] not in (SHORT_KEPT, SHORT_FILTERED, NO_SAMPLES)
    ]
    good = _reference_completion(SHORT_KEPT)
    wrong = "```python\ndef nothing():\n    return None\n```\n"
    rows += [{"task_id": SHORT_KEPT, "completion": c} for c in (good, wrong, good)]
    rows.append({"task_id": SHORT_FILTERED, "completion": _reference_completion(SHORT_FILTERED)})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[tuple[str, int], str]]:
    """Run curate once; return the output and the input text by (file, line)."""
    tmp = tmp_path_factory.mktemp("whole")
    inputs = tmp / "in"
    inputs.mkdir()
    texts: dict[tuple[str, int], str] = {}
    for f in sorted(EXAMPLES.glob("*.jsonl")):
        lines = [ln for ln in f.read_text(encoding="utf-8").splitlines() if ln.strip()]
        if f.name == "code.jsonl":
            lines += _extra_lines()
        padded = [_pad(line, i) for i, line in enumerate(lines, 1)]
        target = inputs / f.name
        target.write_text("".join(p + "\n" for p in padded), encoding="utf-8")
        for i, text in enumerate(padded, 1):
            texts[(str(target), i)] = text
    replay = tmp / "replay.jsonl"
    _replay(replay)
    out = tmp / "out"
    argv = ["curate", "--input", str(inputs), "--output", str(out), "--sampler", "replay"]
    assert main([*argv, "--replay", str(replay), "--samples", str(K), "--quiet", *FAST]) == 0
    return out, texts


def _rows(out: Path, sub: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for f in sorted((out / sub).rglob("*.parquet")):
        rows.extend(pq.read_table(f).to_pylist())
    return rows


def _manifest(out: Path) -> Manifest:
    return Manifest.model_validate_json((out / "manifest.json").read_text())


@pytest.mark.parametrize(
    "reason",
    [
        "validate.parse_error",
        "validate.schema",
        "validate.duplicate_id",
        "dedup.exact",
        "dedup.near",
        "decontam.humaneval",
        "gate.reference_failed",
        "gate.trivial_passes",
        "rollouts.no_samples",
        "filter.too_easy",
        "filter.too_hard",
    ],
)
def test_rejected_raw_is_the_input_record_byte_for_byte(
    run: tuple[Path, dict[tuple[str, int], str]], reason: str
) -> None:
    out, texts = run
    rows = [r for r in _rows(out, "rejected") if r["reason"] == reason]
    assert rows, f"nothing rejected as {reason}"
    for r in rows:
        text = texts[(r["source_file"], r["source_line"])]
        assert r["raw"].encode("utf-8") == text.encode("utf-8")
        assert len(r["raw"]) > 100_000


def test_mistyped_number_is_rejected_with_its_location(
    run: tuple[Path, dict[tuple[str, int], str]],
) -> None:
    out, _ = run
    (row,) = [r for r in _rows(out, "rejected") if r["record_id"] == "code.add_typed"]
    assert row["reason"] == "validate.schema"
    assert "code.add_typed: verifier.timeout_s: Input should be a valid number" in row["detail"]
    assert '(got string "600")' in row["detail"]


def test_every_kept_task_gives_back_its_input_record(
    run: tuple[Path, dict[tuple[str, int], str]],
) -> None:
    out, texts = run
    kept = _rows(out, "tasks")
    assert {r["family"] for r in kept} == {"code", "sql", "api", "config"}
    for row in kept:
        lineage = row["lineage"]
        given = TaskRecord.model_validate_json(
            texts[(lineage["source_file"], lineage["source_line"])]
        )
        assert CuratedTask.model_validate(row).task_record() == given


def test_a_task_short_of_samples_is_kept_on_its_real_n(
    run: tuple[Path, dict[tuple[str, int], str]],
) -> None:
    out, _ = run
    (row,) = [r for r in _rows(out, "tasks") if r["id"] == SHORT_KEPT]
    assert (row["n"], row["k"], row["n_requested"]) == (3, 2, K)
    assert (row["ci_low"], row["ci_high"]) == pytest.approx(wilson_interval(2, 3))
    rollouts = [r for r in _rows(out, "rollouts") if r["task_id"] == SHORT_KEPT]
    assert len(rollouts) == 3


@pytest.mark.parametrize(
    ("task_id", "reason", "n"),
    [(SHORT_FILTERED, "filter.too_easy", 1), (NO_SAMPLES, "rollouts.no_samples", 0)],
)
def test_rejected_rows_record_samples_obtained_and_asked(
    run: tuple[Path, dict[tuple[str, int], str]], task_id: str, reason: str, n: int
) -> None:
    out, _ = run
    rows = _rows(out, "rejected")
    (row,) = [r for r in rows if r["record_id"] == task_id and r["reason"] == reason]
    assert (row["n"], row["n_requested"]) == (n, K)


def test_manifest_counts_tasks_short_of_samples(
    run: tuple[Path, dict[tuple[str, int], str]],
) -> None:
    manifest = _manifest(run[0])
    assert manifest.counts["short_samples"] == 2
    assert manifest.counts["short_samples_kept"] == 1
    assert manifest.stage_counters["rollouts.short_samples"] == 2
    assert manifest.stage_counters["rollouts.samples_missing"] == (K - 3) + (K - 1) + K


def test_summary_says_how_many_tasks_got_fewer_samples(
    run: tuple[Path, dict[tuple[str, int], str]],
) -> None:
    buf = io.StringIO()
    render_summary(_manifest(run[0]), run[0], Console(file=buf, width=200))
    assert f"2 got < {K} samples (1 kept" in buf.getvalue()
