"""End to end: ``tasksieve eval --agent`` on two repo examples with recorded actions, then
``eval compare`` on two such evals.

Eval A (two episodes per task, at most three steps, one protocol error allowed):

- ``toml.6bb3f9da569e`` episode 0 applies the reference patch at step 1 and submits at step 2
  (pass); episode 1 answers without a command (protocol);
- ``toml.d40320df4c2e`` episode 0 looks around and submits (wrong); episode 1 never submits
  (the step budget: timeout).

Eval B replays the same, except that the first task's episode 0 only looks around: B loses the
task A solved.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tasksieve.pipeline.cli import main
from tasksieve.pipeline.eval.agent_scores import agent_failure_kind
from tasksieve.transforms.agent import scripted
from tasksieve.verifiers.registry import make_sandbox

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOTS = ROOT / "examples" / "snapshots"
SOLVED, FAILED = "repo.toml.6bb3f9da569e", "repo.toml.d40320df4c2e"


def _tasks(path: Path) -> dict[str, dict[str, Any]]:
    lines = (ROOT / "examples" / "tasks" / "repo.jsonl").read_text().splitlines()
    found = {t["id"]: t for t in map(json.loads, lines) if t["id"] in (SOLVED, FAILED)}
    path.write_text("".join(json.dumps(found[i]) + "\n" for i in (SOLVED, FAILED)))
    return found


def _replay(path: Path, first_action: str) -> None:
    rows = [
        {"task_id": SOLVED, "completion": first_action},
        {"task_id": SOLVED, "completion": "I think the bug is fixed now."},
        {"task_id": SOLVED, "turn": 2, "episode": 0, "completion": scripted.SUBMIT},
        {"task_id": FAILED, "completion": scripted.fenced("ls")},
        {"task_id": FAILED, "completion": scripted.fenced("ls")},
        {"task_id": FAILED, "turn": 2, "episode": 0, "completion": scripted.SUBMIT},
        {"task_id": FAILED, "turn": 2, "episode": 1, "completion": scripted.fenced("pwd")},
        {"task_id": FAILED, "turn": 3, "episode": 1, "completion": scripted.fenced("ls")},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _eval(tmp: Path, name: str, first_action: str) -> Path:
    replay, out = tmp / f"{name}.jsonl", tmp / name
    _replay(replay, first_action)
    argv = ["eval", "-i", str(tmp / "tasks.jsonl"), "-o", str(out), "--sampler", "replay"]
    argv += ["--replay", str(replay), "-n", "2", "--k", "1,2", "--agent"]
    argv += ["--agent-max-steps", "3", "--agent-protocol-errors", "1", "--quiet"]
    argv += ["--snapshot-store", str(SNAPSHOTS), "--resamples", "200"]
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(argv) == 0
    return out


@pytest.fixture(scope="module")
def evals(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("eval-agent")
    tasks = _tasks(tmp / "tasks.jsonl")
    python = make_sandbox("process").python  # the interpreter of the agent's shell
    patch = str(tasks[SOLVED]["reference_solution"])
    solve = scripted.fenced(scripted.apply_command(patch, python))
    return _eval(tmp, "a", solve), _eval(tmp, "b", scripted.fenced("ls"))


def _scores(out: Path) -> dict[str, dict[str, Any]]:
    return {r["task_id"]: r for r in pq.read_table(out / "scores").to_pylist()}


@pytest.mark.slow
def test_agent_eval_scores_success_by_step_and_failure_kinds(evals: tuple[Path, Path]) -> None:
    a = _scores(evals[0])
    solved, failed = a[SOLVED], a[FAILED]
    assert (solved["n"], solved["c"], solved["c_by_turn"]) == (2, 1, [0, 1, 1])
    assert (solved["fail_protocol"], solved["fail_wrong"]) == (1, 0)
    assert (failed["n"], failed["c"], failed["c_by_turn"]) == (2, 0, [0, 0, 0])
    assert (failed["fail_wrong"], failed["fail_timeout"]) == (1, 1)
    assert solved["pass_at_1"] == pytest.approx(0.5) and solved["pass_at_2"] == 1.0
    assert solved["sandbox_s"] > 0 and failed["sandbox_s"] > 0  # steps and the verdict
    summary = json.loads((evals[0] / "summary.json").read_text())
    by_step = [s["success"] for s in summary["overall"]["success_by_turn"]]
    assert by_step == pytest.approx([0.0, 0.25, 0.25])
    assert summary["agent"]["endings"] == {"max_steps": 1, "protocol_errors": 1, "submitted": 2}


@pytest.mark.slow
def test_agent_eval_writes_trajectories_and_its_views(evals: tuple[Path, Path]) -> None:
    out = evals[0]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["counts"]["trajectory_steps"] == 2 + 1 + 2 + 3
    assert manifest["config"]["agent"]["max_steps"] == 3
    from tasksieve.pipeline.eval.catalog import connect

    con = connect(out)
    try:
        rows = con.execute(
            "SELECT task_id, episode, max(step), any_value(episode_ending) FROM trajectories "
            "GROUP BY ALL ORDER BY ALL"
        ).fetchall()
    finally:
        con.close()
    assert rows == [
        (SOLVED, 0, 2, "submitted"),
        (SOLVED, 1, 1, "protocol_errors"),
        (FAILED, 0, 2, "submitted"),
        (FAILED, 1, 3, "max_steps"),
    ]
    assert "Success by step" in (out / "report.html").read_text()


@pytest.mark.slow
def test_compare_two_agent_evals_finds_the_lost_task(evals: tuple[Path, Path]) -> None:
    argv = ["eval", "compare", str(evals[0]), str(evals[1]), "--format", "json"]
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(argv) == 0
    result = json.loads(buf.getvalue())
    assert result["tasks_paired"] == 2
    assert result["flipped"] == {"gained": [], "lost": [SOLVED]}
    assert result["metrics"]["pass_at_1"]["diff"] == pytest.approx(-0.25)


def test_agent_eval_refuses_turns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "t.jsonl").write_text("{}\n")
    argv = ["eval", "-i", str(tmp_path / "t.jsonl"), "-o", str(tmp_path / "o"), "--agent"]
    argv += ["--turns", "2", "--sampler", "replay", "--replay", str(tmp_path / "t.jsonl")]
    assert main(argv) == 2
    assert "--agent runs episodes of its own" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("ending", "status", "kind"),
    [
        ("submitted", "pass", None),
        ("submitted", "fail", "wrong"),
        ("submitted", "error", "error"),
        ("submitted", "timeout", "timeout"),
        ("submitted", "infra_error", "infra"),
        ("max_steps", "fail", "timeout"),
        ("max_tokens", "fail", "timeout"),
        ("wall", "fail", "timeout"),
        ("protocol_errors", "fail", "protocol"),
        ("session_lost", "fail", "error"),
        ("no_session", "infra_error", "infra"),
    ],
)
def test_an_episode_ending_is_a_failure_kind(ending: str, status: str, kind: str | None) -> None:
    row = {"finish_reason": ending, "verdict": {"status": status}, "solution": ""}
    assert agent_failure_kind(row) == kind
