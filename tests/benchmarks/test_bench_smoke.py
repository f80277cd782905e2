"""The throughput benchmarks run in quick mode, and their verdict checks catch wrong verdicts."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import reward_throughput, sandbox_throughput, service_load, sql_throughput
from benchmarks.humaneval_jobs import jobs as code_jobs
from benchmarks.sandbox_batch import BEFORE
from benchmarks.sql_jobs import jobs as sql_jobs
from tasksieve.verifiers.sandbox.process.forkserver import SERVER_SOURCE

ROOT = Path(__file__).resolve().parents[2]
needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")


@pytest.mark.slow
@needs_bwrap
def test_sandbox_quick_run_gets_every_expected_verdict(capsys: pytest.CaptureFixture) -> None:
    assert sandbox_throughput.main(["--quick"]) == 0
    assert "matched all 8 expected verdicts in every round" in capsys.readouterr().out


@pytest.mark.slow
@needs_bwrap
def test_api_verify_tiny_run_passes_every_reference() -> None:
    # a child process: the baseline imports moto, whose hooks would stay in this one
    cmd = [sys.executable, "-m", "benchmarks.api_verify", "--n", "2", "--rounds", "1"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "ours/cold" in out.stdout and "ours/baseline" in out.stdout


@pytest.mark.slow
@needs_bwrap
def test_sql_quick_run_setups_agree(capsys: pytest.CaptureFixture) -> None:
    assert sql_throughput.main(["--quick"]) == 0
    assert "all setups agree with the intended ones in every round" in capsys.readouterr().out


@pytest.mark.slow
@needs_bwrap
def test_reward_quick_run_verdicts_agree(capsys: pytest.CaptureFixture) -> None:
    argv = ["--prompts", "2", "--completions", "2", "--rounds", "1", "--workers", "2"]
    assert reward_throughput.main(argv) == 0
    out = capsys.readouterr().out
    assert "identical across the three ways and as constructed" in out
    assert "| processes |" in out


def test_reward_batch_groups_right_and_wrong_per_prompt() -> None:
    tasks, texts, expect = reward_throughput.batch(3, 4)
    assert len(tasks) == len(texts) == 12
    assert [t.id for t in tasks[:4]] == [tasks[0].id] * 4
    assert expect == [True, False] * 6
    assert texts[0] != texts[1]


@pytest.mark.slow
@needs_bwrap
def test_service_load_tiny_run_loses_nothing(capsys: pytest.CaptureFixture) -> None:
    argv = ["--workers", "1", "--requests", "4", "--rounds", "1", "--failover-requests", "8"]
    assert service_load.main(argv) == 0
    out = capsys.readouterr().out
    assert "8 answered, 0 lost, 0 run twice" in out and "in-process" in out


def test_failover_tells_a_rerun_after_the_kill_from_a_double_run(tmp_path: Path) -> None:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    line = '{{"key": "{}", "kind": "verify"}}\n'.format
    # the killed server ran k1 and k2 (k1 unanswered, run again on b) and left a torn line,
    # which the restarted one's first line (k5) completes; then k3 ran on both servers: an
    # idempotency fault
    a.write_text(line("k1") + line("k2") + '{"key": "k' + line("k5") + line("k3"))
    b.write_text(line("k1") + line("k3") + line("k4"))
    assert service_load.run_counts([a, b], killed_lines=3) == (1, 1)
    assert service_load.run_counts([a, b], killed_lines=0) == (0, 2)


def test_service_workload_pairs_references_with_empty_solutions() -> None:
    work = service_load.workload(8)
    assert [s == "" for _, s in work] == [False, True] * 4
    assert work[0][0]["id"] == work[1][0]["id"] and work[0][1] == work[0][0]["reference_solution"]


def test_sandbox_workload_mixes_right_and_wrong() -> None:
    work = code_jobs(6)
    assert [j.expect_pass for j in work] == [True, False] * 6
    assert {j.kind for j in work} == {"canonical", "off_by_one", "wrong_return"}
    for right, wrong in zip(work[::2], work[1::2], strict=True):
        assert right.solution != wrong.solution


@pytest.mark.parametrize("flip", [0, 3, 11])
def test_sandbox_mismatch_is_reported(flip: int) -> None:
    work = code_jobs(6)
    verdicts = [j.expect_pass for j in work]
    verdicts[flip] = not verdicts[flip]
    wrong = sandbox_throughput.mismatches(work, verdicts)
    assert len(wrong) == 1 and work[flip].name in wrong[0]


def test_sql_workload_has_distinct_references_and_every_status() -> None:
    work = sql_jobs(0)
    refs = {j.spec.reference_query for j in work}
    assert len(refs) == len(work) // 5
    assert {j.expect for j in work} == {"pass", "fail", "error"}


def test_sql_salt_changes_setups_not_answers() -> None:
    a, b = sql_jobs(3, salt="one"), sql_jobs(3, salt="two")
    assert [j.candidate for j in a] == [j.candidate for j in b]
    assert {j.spec.setup_sql for j in a}.isdisjoint({j.spec.setup_sql for j in b})


@pytest.mark.parametrize("setup", ["a", "b", "ours"])
def test_sql_disagreement_is_reported(setup: str) -> None:
    work = sql_jobs(2)
    got = {k: [j.expect for j in work] for k in ("a", "b", "ours")}
    got[setup][4] = "pass" if work[4].expect != "pass" else "fail"
    wrong = sql_throughput.disagreements(work, got)
    assert len(wrong) == 1 and work[4].task.id in wrong[0]


def test_verify_groups_tiny_run_agrees(capsys: pytest.CaptureFixture) -> None:
    from benchmarks import verify_groups

    assert verify_groups.main(["--samples", "2", "--rounds", "1"]) == 0
    out = capsys.readouterr().out
    assert "32 solutions, 2 per task" in out and "statuses agree: {'pass': 32}" in out


def test_each_guest_before_a_change_can_still_be_rebuilt() -> None:
    """The ``batchexit`` and ``batchrun`` setups patch the current guest back: every text they
    replace must occur once, or their "before" would silently be the current guest."""
    for name, pairs in BEFORE.items():
        assert [SERVER_SOURCE.count(now) for now, _ in pairs] == [1] * len(pairs), name


def test_cli_startup_times_one_child_and_reads_its_own_peak() -> None:
    from benchmarks.cli_startup import own_peak_mb, time_once

    size = int(own_peak_mb()) + 300  # above any floor this process sets
    grow = f"b = bytearray({size} * 2**20); b[::4096] = b'x' * len(b[::4096])"
    small = time_once(["-c", "pass"], {0}, ROOT)[2]
    wall, cpu, peak_mb = time_once(["-c", grow], {0}, ROOT)
    assert wall > 0 and cpu > 0
    assert peak_mb > size, (peak_mb, size)  # the child's own
    # each child's own peak, not the largest of the children so far; Linux starts the count
    # at this process's resident size (a floor the script prints)
    assert time_once(["-c", "pass"], {0}, ROOT)[2] < max(own_peak_mb(), small) + 50
    with pytest.raises(SystemExit, match="exit 3"):
        time_once(["-c", "import sys; sys.exit(3)"], {0}, ROOT)
