"""End to end: `tasksieve curate` on examples/ with the replay sampler (no model needed)."""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tasksieve.pipeline.cli import main
from tests.curate_flags import FAST

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "tasks"
REPLAY = ROOT / "examples" / "replay" / "completions.jsonl"


def _curate(out: Path, *extra: str, source: Path = EXAMPLES) -> int:
    return main(
        [
            "curate",
            "--input",
            str(source),
            "--output",
            str(out),
            "--sampler",
            "replay",
            "--replay",
            str(REPLAY),
            "--samples",
            "4",
            "--quiet",
            *extra,
        ]
    )


# The repo tasks with recorded completions, two per package: every repo task runs its
# repository's tests for each gate, mutant and sample, so the shared run takes these six of the
# 33 (make demo curates them all; tests/verifiers/repo covers the family in depth).
REPO_LINES = (1, 2, 12, 13, 23, 24)
E2E_INPUT = "in"


def _e2e_inputs(root: Path) -> Path:
    """Every example file, repo.jsonl cut to ``REPO_LINES``, beside the shipped snapshots."""
    inputs = root / E2E_INPUT
    inputs.mkdir()
    for f in sorted(EXAMPLES.glob("*.jsonl")):
        text = f.read_text(encoding="utf-8")
        if f.name == "repo.jsonl":
            lines = text.splitlines()
            text = "".join(lines[i - 1] + "\n" for i in REPO_LINES)
        (inputs / f.name).write_text(text, encoding="utf-8")
    (root / "snapshots").symlink_to(EXAMPLES.parent / "snapshots")
    return inputs


@pytest.fixture(scope="module")
def curated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """One run shared by the module, with its ``--format json`` stdout."""
    root = tmp_path_factory.mktemp("curate")
    out = root / "out"
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        assert _curate(out, "--format", "json", source=_e2e_inputs(root)) == 0
    return out, stdout.getvalue()


@pytest.fixture(scope="module")
def run(curated: tuple[Path, str]) -> Path:
    return curated[0]


def _rows(out: Path, sub: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for f in sorted((out / sub).rglob("*.parquet")):
        rows.extend(pq.read_table(f).to_pylist())
    return rows


def _input_lines(run: Path) -> int:
    inputs = run.parent / E2E_INPUT
    return sum(
        1 for f in inputs.glob("*.jsonl") for line in f.read_text().splitlines() if line.strip()
    )


def test_format_json_prints_one_summary_object(curated: tuple[Path, str]) -> None:
    out, stdout = curated
    manifest = json.loads((out / "manifest.json").read_text())
    assert json.loads(stdout) == {
        "output": str(out.resolve()),
        "manifest": str(out.resolve() / "manifest.json"),
        "run_id": manifest["run_id"],
        "config_fingerprint": manifest["config_fingerprint"],
        "counts": manifest["counts"],
        "rejected_by_reason": manifest["rejected_by_reason"],
        "pass_rate_histogram": manifest["pass_rate_histogram"],
    }


def test_every_input_record_is_kept_or_rejected(run: Path) -> None:
    kept, rejected = _rows(run, "tasks"), _rows(run, "rejected")
    assert len(kept) + len(rejected) == _input_lines(run)
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["counts"]["input"] == _input_lines(run)
    assert manifest["counts"]["kept"] == len(kept)
    assert sum(manifest["rejected_by_reason"].values()) == len(rejected)


def test_no_record_is_both_kept_and_rejected(run: Path) -> None:
    kept = {r["id"] for r in _rows(run, "tasks")}
    rejected = {r["record_id"] for r in _rows(run, "rejected") if r["record_id"]}
    assert not kept & rejected


def test_every_rejection_has_reason_and_location(run: Path) -> None:
    for r in _rows(run, "rejected"):
        assert r["reason"] and r["stage"]
        assert r["source_file"].endswith(".jsonl") and r["source_line"] >= 1


@pytest.mark.parametrize(
    "reason",
    [
        "validate.parse_error",
        "validate.schema",
        "dedup.exact",
        "decontam.humaneval",
        "gate.reference_failed",
        "gate.weak_tests",
        "filter.ambiguous",
        "filter.too_easy",
        "filter.too_hard",
    ],
)
def test_deliberately_bad_examples_get_their_reason(run: Path, reason: str) -> None:
    reasons = {r["reason"] for r in _rows(run, "rejected")}
    assert reason in reasons


def test_kept_tasks_have_mixed_pass_rates_and_intervals(run: Path) -> None:
    kept = _rows(run, "tasks")
    assert kept, "the examples must keep some tasks"
    for t in kept:
        assert 0 < t["pass_rate"] < 1
        assert t["ci_low"] <= t["pass_rate"] <= t["ci_high"]
        assert t["k"] == round(t["pass_rate"] * t["n"])
        assert {g["gate"] for g in t["gates"]} >= {"reference_passes", "trivial_fails"}


def test_rollouts_cover_every_sample_of_scored_tasks(run: Path) -> None:
    rollouts = _rows(run, "rollouts")
    kept = _rows(run, "tasks")
    by_task: dict[str, int] = {}
    for r in rollouts:
        by_task[r["task_id"]] = by_task.get(r["task_id"], 0) + 1
    for t in kept:
        assert by_task[t["id"]] == t["n"]
        passes = sum(
            1 for r in rollouts if r["task_id"] == t["id"] and r["verdict"]["status"] == "pass"
        )
        assert passes == t["k"]


def test_shards_carry_version_and_fingerprint(run: Path) -> None:
    manifest = json.loads((run / "manifest.json").read_text())
    for f in run.rglob("*.parquet"):
        meta = pq.read_metadata(f).metadata
        assert meta[b"schema_version"] == manifest["schema_version"].encode()
        assert meta[b"config_fingerprint"] == manifest["config_fingerprint"].encode()


def test_duckdb_reads_the_output_with_no_extra_step(run: Path) -> None:
    duckdb = pytest.importorskip("duckdb")
    rows = duckdb.sql(
        f"select family, count(*), avg(pass_rate) from '{run}/tasks/**/*.parquet' group by 1"
    ).fetchall()
    assert sum(r[1] for r in rows) == len(_rows(run, "tasks"))


def test_rerun_into_existing_output_refuses(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _curate(run) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert (run / "manifest.json").exists()


def test_overwrite_replaces_cleanly(tmp_path: Path, run: Path) -> None:
    out = tmp_path / "out"
    shutil.copytree(run, out)
    (out / "stale.txt").write_text("from an older run")
    # the subject is the swap of outputs, not the stages: one family, detectors off
    assert _curate(out, "--overwrite", *FAST, source=EXAMPLES / "code.jsonl") == 0
    assert not (out / "stale.txt").exists()
    assert (out / "manifest.json").exists()
    assert not list(tmp_path.glob(".out.*")), "no staging or old dirs left behind"


def test_missing_input_is_a_clean_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "curate",
            "--input",
            str(tmp_path / "nope.jsonl"),
            "--output",
            str(tmp_path / "o"),
            "--sampler",
            "replay",
            "--replay",
            str(REPLAY),
        ]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert "nope.jsonl" in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()


def test_bad_band_is_a_clean_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = _curate(tmp_path / "o", "--too-hard", "0.9", "--too-easy", "0.2")
    assert code == 2
    assert "too_hard < too_easy" in capsys.readouterr().err


@pytest.mark.parametrize(
    "extra,message",
    [
        (["--smaples=8"], "--smaples"),
        (["--too_easy=0.9"], "--too_easy"),
    ],
)
def test_mistyped_flags_are_refused_not_ignored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    assert _curate(tmp_path / "o", *extra) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_missing_replay_file_is_a_clean_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "curate",
            "--input",
            str(EXAMPLES),
            "--output",
            str(tmp_path / "o"),
            "--sampler",
            "replay",
            "--replay",
            str(tmp_path / "none.jsonl"),
        ]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert "none.jsonl" in err and "Traceback" not in err


def test_beam_pipeline_options_pass_through(tmp_path: Path) -> None:
    out = tmp_path / "o"
    assert _curate(out, "--direct_num_workers=1", *FAST, source=EXAMPLES / "code.jsonl") == 0
    assert json.loads((out / "manifest.json").read_text())["counts"]["input"] > 0


def test_run_writes_its_report_with_relative_paths_only(run: Path) -> None:
    manifest = json.loads((run / "manifest.json").read_text())
    page = (run / "report.html").read_text(encoding="utf-8")
    kept = manifest["counts"]["kept"]
    assert f'id="count-kept">kept<b>{kept}</b>' in page and manifest["run_id"] in page
    assert "staging" not in page  # written before the rename, naming no staging path
    links = re.findall(r'(?:href|src)="([^"]*)"', page)
    assert links and all(u == "manifest.json" or u[:1] == "#" or u[:5] == "data:" for u in links)
    assert all(not f.endswith(".html") for files in manifest["outputs"].values() for f in files)
