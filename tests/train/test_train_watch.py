"""Watching training: --family-weights in the mix, held-out pass@1 per family (--eval-tasks)."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from tasksieve.pipeline.cli import main
from tasksieve.pipeline.train.curriculum import parse_family_weights, schedule
from tasksieve.pipeline.train.exits import EXIT_USAGE
from tasksieve.schemas import FAMILIES


def test_family_weights_parse_and_refuse_what_is_wrong() -> None:
    assert parse_family_weights("code=2, sql=0.5", FAMILIES) == {"code": 2.0, "sql": 0.5}
    for bad in ("python=1", "code", "code=x", "code=-1", "code=inf"):
        with pytest.raises(ValueError, match="--family-weights"):
            parse_family_weights(bad, FAMILIES)


def test_family_weights_set_the_share_of_each_family() -> None:
    rates = [0.5] * 4
    fams = ["code", "code", "sql", "sql"]
    weights = [{"code": 3.0, "sql": 1.0}[f] for f in fams]
    order = schedule(rates, 4000, "none", seed=1, family_weights=weights)
    share = Counter(fams[i] for i in order)["code"] / len(order)
    assert share == pytest.approx(0.75, abs=0.03)
    zero = [{"code": 0.0, "sql": 1.0}[f] for f in fams]
    assert {fams[i] for i in schedule(rates, 200, "band", seed=1, family_weights=zero)} == {"sql"}


def _refused(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main([*argv, "--quiet"]) == EXIT_USAGE
    return capsys.readouterr().err


def test_eval_every_needs_eval_tasks(
    curated: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["train", "--tasks", str(curated), "--output", str(tmp_path / "o"), "--eval-every", "2"]
    assert "--eval-every needs --eval-tasks" in _refused(capsys, argv)


def test_held_out_tasks_may_not_be_trained_on(
    curated: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["train", "--tasks", str(curated), "--output", str(tmp_path / "o")]
    assert "also training tasks" in _refused(capsys, [*argv, "--eval-tasks", str(curated)])


def _held_out_sql(curated: Path, dest: Path) -> Path:
    """A copy of the shared run holding only its SQL tasks (held out from code training)."""
    run = dest / "held-out"
    shutil.copytree(curated, run)
    for fam in FAMILIES:
        if fam != "sql":
            shutil.rmtree(run / "tasks" / fam, ignore_errors=True)
    return run


@pytest.mark.slow
@pytest.mark.train
def test_held_out_pass_at_1_is_logged_with_the_rewards(curated: Path, tmp_path: Path) -> None:
    pytest.importorskip("trl")
    from tasksieve.transforms.samplers.model_cache import bundled_gguf

    try:
        bundled_gguf()
    except FileNotFoundError as e:
        pytest.skip(str(e))
    out = tmp_path / "ckpt"
    argv = ["train", "--tasks", str(curated), "--output", str(out), "--quiet", "--steps", "2"]
    argv += ["--families", "code", "--prompts-per-step", "1", "--num-generations", "2"]
    argv += ["--max-completion-length", "24", "--cpu-threads", "1", "--family-weights", "code=1"]
    argv += ["--eval-tasks", str(_held_out_sql(curated, tmp_path)), "--eval-every", "1"]
    assert main(argv) == 0
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    evals = [r for r in rows if "eval/pass_at_1" in r]
    assert [r["step"] for r in evals] == [0, 1, 2]
    assert all(set(r) >= {"eval/sql/pass_at_1", "eval/sql/reward_mean"} for r in evals)
    assert all(0.0 <= r["eval/pass_at_1"] <= 1.0 and r["eval/tasks"] >= 1 for r in evals)
    assert any("reward" in r for r in rows if "eval/pass_at_1" not in r)  # the trainer's rows
    lineage = json.loads((out / "tasksieve_lineage.json").read_text())
    assert lineage["family_weights"] == {"code": 1.0} and lineage["eval_tasks"]
