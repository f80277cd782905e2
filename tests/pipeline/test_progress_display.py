"""The curate progress display: stage arithmetic, summary lines, and the real CLI off a terminal."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
from rich.console import Console

from tasksieve.pipeline.cli import main
from tasksieve.pipeline.curate.progress import CurateProgress, heartbeat_line, summary_line
from tasksieve.pipeline.curate.stage_counts import StageView, curate_stages, stage_views
from tasksieve.transforms.runtime import progress
from tests.curate_flags import FAST

ROOT = Path(__file__).resolve().parents[2]
REPLAY = ROOT / "examples" / "replay" / "completions.jsonl"
PICKED = {  # one kept or filtered per code file line, and one that Validate rejects
    "code.jsonl": ("code.add", "code.fizzbuzz_list"),
    "problems.jsonl": ("code.malformed_json",),
}
ONE_SHOT = [s.label for s in curate_stages()]


def _inputs(root: Path) -> Path:
    root.mkdir()
    for name, ids in PICKED.items():
        lines = (ROOT / "examples" / "tasks" / name).read_text().splitlines(keepends=True)
        picked = [line for line in lines if any(f'"{i}"' in line for i in ids)]
        assert len(picked) == len(ids), (name, picked)
        (root / name).write_text("".join(picked))
    return root


def _stderr_of_curate(
    tmp: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, *flags: str
) -> str:
    monkeypatch.setenv("TRANSFORMERS_VERBOSITY", "error")  # the CLI sets it; keep it local
    inputs = _inputs(tmp / "in")
    argv = ["curate", "--input", str(inputs), "--output", str(tmp / "out"), *flags]
    argv += ["--sampler", "replay", "--replay", str(REPLAY), "--samples", "4", *FAST]
    capsys.readouterr()
    assert main(argv) == 0
    return capsys.readouterr().err


@pytest.mark.slow
def test_off_a_terminal_curate_prints_one_line_per_stage_and_no_task_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    err = _stderr_of_curate(tmp_path, capsys, monkeypatch)
    lines = [line for line in err.splitlines() if line.startswith("progress: ")]
    assert [line.split(": ")[1] for line in lines] == ONE_SHOT
    assert "progress: Validate: 3 of 3 tasks" in err
    assert "progress: Rollouts: 2 of 2 tasks, 8 of 8 samples" in err
    assert "progress: Write: 3 of 3 rows, 8 rollout rows" in err
    assert "sampled code.add" not in err
    assert "WARNING" not in err, err  # Beam's ignored type hints filled screens before
    assert os.environ.get(progress.ENV) is None  # the channel is closed with the run


@pytest.mark.slow
def test_verbose_brings_back_the_per_task_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    err = _stderr_of_curate(tmp_path, capsys, monkeypatch, "--verbose")
    assert "sampled code.add" in err
    assert "gates code.add" in err
    assert "progress: Filter: 2 of 2 tasks" in err


@pytest.mark.slow
def test_quiet_shows_no_progress(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    err = _stderr_of_curate(tmp_path, capsys, monkeypatch, "--quiet")
    assert "progress:" not in err
    assert "sampled code.add" not in err


def test_verbose_and_quiet_exclude_each_other(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["curate", "--input", "x", "--output", "y", "--verbose", "--quiet"])
    assert stop.value.code == 2
    assert "not allowed with" in capsys.readouterr().err


def _views(counters: dict[str, int], rollouts: str = "one-shot") -> dict[str, StageView]:
    views = stage_views(curate_stages(rollouts=rollouts), counters, k=4)
    return {v.spec.label: v for v in views}


def test_validate_totals_the_input_and_counts_a_duplicate_id_once() -> None:
    views = _views(
        {
            "ingest.records": 10,
            "validate.ok": 9,
            "rejected@validate": 2,  # one schema, one duplicate id (also in validate.ok)
            "rejected.validate.duplicate_id": 1,
        }
    )
    assert (views["Validate"].done, views["Validate"].total) == (10, 10)
    assert views["Exact dedup"].total == 8


def test_a_stage_total_is_what_the_stage_before_did_not_reject() -> None:
    views = _views({"ingest.records": 10, "validate.ok": 10, "rejected@exact_dedup": 3})
    assert views["Near dedup"].total == 7
    assert views["Gates"].total == 7
    assert views["Near dedup"].done == 0


def test_rollouts_and_verify_count_samples_of_the_tasks_that_reached_them() -> None:
    counters = {
        "ingest.records": 5,
        "validate.ok": 5,
        "rejected@gates": 1,  # 4 reach Rollouts
        "rollouts.sampled": 3,
        "rollouts.samples_missing": 2,
        "rejected@rollouts": 1,  # a sampler error: 3 reach Verify, 12 - 2 samples
        "verify.pass": 6,
        "verify.infra_error": 1,
    }
    views = _views(counters)
    rollouts, verify = views["Rollouts"], views["Verify"]
    assert (rollouts.done, rollouts.total) == (4, 4)
    assert (rollouts.samples, rollouts.samples_total) == (10, 16)
    assert (verify.done, verify.total) == (7, 10)


def test_adaptive_sampling_has_no_total_ahead() -> None:
    views = _views({"ingest.records": 5, "verify.pass": 7}, rollouts="adaptive")
    assert (views["Adaptive rollouts"].done, views["Adaptive rollouts"].total) == (7, None)
    assert "Rollouts" not in views


def test_optional_detectors_appear_only_when_on() -> None:
    labels = [s.label for s in curate_stages(strength=True, ambiguity=True)]
    assert labels.index("Test strength") == labels.index("Gates") + 1
    assert labels.index("Ambiguity") == labels.index("Filter") - 1
    assert "Test strength" not in ONE_SHOT and "Ambiguity" not in ONE_SHOT


def test_write_totals_every_input_record() -> None:
    views = _views({"ingest.records": 6, "write.tasks": 2, "write.rejected": 3})
    assert (views["Write"].done, views["Write"].total) == (5, 6)


@pytest.mark.parametrize(
    ("view", "line"),
    [
        (
            StageView(curate_stages()[4], 5, 8, started=10.0, ended=12.5),
            "Gates: 5 of 8 tasks in 2.5 s (2.0/s)",
        ),
        (
            StageView(curate_stages()[5], 2, 2, 8, 8, started=1.0, ended=5.0),
            "Rollouts: 2 of 2 tasks, 8 of 8 samples in 4.0 s (30.0/min)",
        ),
        (StageView(curate_stages()[0], 3, 3, started=1.0, ended=1.0), "Validate: 3 of 3 tasks"),
        (StageView(curate_stages()[2], 0, 0), "Near dedup: no tasks reported"),
        (
            StageView(curate_stages(rollouts="episodes")[5], 9, None, started=0.0, ended=200.0),
            "Episodes: 9 samples in 3 min 20 s (2.7/min)",
        ),
    ],
)
def test_summary_line(view: StageView, line: str) -> None:
    assert summary_line(view).startswith(line)


def test_heartbeat_names_only_the_stages_that_started() -> None:
    views = stage_views(curate_stages(), {"ingest.records": 4, "validate.ok": 4}, 4)
    assert heartbeat_line(views) == "Validate 4/4 tasks"


def test_the_display_restores_the_environment_and_removes_its_channel(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(progress.ENV, "earlier")
    out = io.StringIO()
    shown = CurateProgress(curate_stages(), 4, Console(file=io.StringIO()), live=False, out=out)
    with shown:
        channel = os.environ[progress.ENV]
        progress.report("ingest.records", 3)
        progress.report("validate.ok", 3)
    assert os.environ[progress.ENV] == "earlier"
    assert not Path(channel).exists()
    shown.print_summary()
    assert out.getvalue().splitlines()[0].startswith("progress: Validate: 3 of 3 tasks")


def test_the_manifest_counters_override_what_was_reported() -> None:
    out = io.StringIO()
    shown = CurateProgress(curate_stages(), 4, Console(file=io.StringIO()), live=False, out=out)
    with shown:
        progress.report("ingest.records", 2)
    shown.print_summary({"ingest.records": 5, "validate.ok": 5})
    assert "progress: Validate: 5 of 5 tasks" in out.getvalue()
