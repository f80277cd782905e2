"""A CPU smoke run of `tasksieve train`: the bundled SmolLM2-135M, 2 GRPO steps, code and SQL.

The rewards the trainer logged must be `tasksieve verify`'s verdicts for the same
completions, scored by the task's reward spec, and must include both a pass and a failure
(the run adds a lenient task the tiny model passes only sometimes, so a reward function
stuck at one value cannot pass); TRL's own per-step reward must be their
mean; the checkpoint must load and name the curate run it was trained on.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tasksieve.pipeline.cli import main
from tasksieve.pipeline.train.run import COMPLETIONS_FILE, LINEAGE_FILE, METRICS_FILE
from tasksieve.schemas import CuratedTask, TaskRecord, Verdict
from tasksieve.schemas.arrow import TASKS_SCHEMA
from tasksieve.transforms.runtime.items import canonical_json
from tasksieve.transforms.samplers.extract import extract_solution
from tasksieve.verifiers.rewards import Reward, reward

pytestmark = [pytest.mark.train, pytest.mark.slow]

STEPS, PROMPTS, GENERATIONS = 2, 2, 2
# with this seed the band curriculum draws the lenient task twice, among code and SQL tasks
SEED = 5


def _needs_trainer() -> None:
    pytest.importorskip("trl")
    pytest.importorskip("datasets")
    from tasksieve.transforms.samplers.model_cache import bundled_gguf

    try:
        bundled_gguf()
    except FileNotFoundError as e:
        pytest.skip(str(e))


# Passed by any program that parses and prints nothing; failed by prose (no program) and by
# code that prints. The tiny model's 32-token answers to it land on both sides.
LENIENT_ID = "code.smoke_silent_add"
LENIENT = {
    "id": LENIENT_ID,
    "family": "code",
    "prompt": "Write a Python function add(a, b) that returns a + b. Do not print anything.",
    "verifier": {"family": "code", "style": "io", "io_cases": [{"stdin": "", "stdout": ""}]},
    "reference_solution": "def add(a, b):\n    return a + b\n",
    "source": {"dataset": "tasksieve-tests", "license": "Apache-2.0"},
    "tags": ["style:io"],
}


def _with_lenient_task(curated: Path, dest: Path) -> Path:
    """A copy of the curate run with one more kept code shard: the lenient task, p = 0.5.

    The row is built as ``tasksieve.transforms.filter.curated_row`` builds one, taking the curation
    measurements it does not set (gates, lineage) from a kept code task of the same run.
    """
    run = dest / "run"
    shutil.copytree(curated, run)
    shard = sorted((run / "tasks" / "code").glob("*.parquet"))[0]
    base = CuratedTask.model_validate(pq.read_table(shard).to_pylist()[0])
    task = TaskRecord.model_validate(LENIENT)
    row = CuratedTask(
        **{
            **base.model_dump(),
            "id": task.id,
            "family": task.family,
            "prompt": task.prompt,
            "verifier": canonical_json(task.verifier.model_dump(mode="json")),
            "reference_solution": task.reference_solution,
            "source_dataset": task.source.dataset,
            "source_license": task.source.license,
            "source_url": task.source.url,
            "source_author": task.source.author,
            "tags": list(task.tags),
            "metadata": canonical_json(task.metadata),
            "reward": canonical_json(task.reward.model_dump(mode="json")),
            "n": 4,
            "k": 2,
            "n_requested": 4,
            "pass_rate": 0.5,
            "difficulty": "keep",
            "findings": [],
            "test_strength": None,
            "ambiguity": None,
        }
    )
    schema = pq.read_schema(shard)  # TASKS_SCHEMA with the run's fingerprint and id
    assert schema.remove_metadata() == TASKS_SCHEMA.remove_metadata()
    table = pa.Table.from_pylist([row.model_dump()], schema=schema)
    pq.write_table(table, run / "tasks" / "code" / "part-lenient.parquet", compression="zstd")
    return run


@pytest.fixture(scope="module")
def smoke_run(curated: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shared curate run plus the lenient task (the shared run is left untouched)."""
    return _with_lenient_task(curated, tmp_path_factory.mktemp("smoke-run"))


@pytest.fixture(scope="module")
def trained(smoke_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    _needs_trainer()
    out = tmp_path_factory.mktemp("ckpt") / "ckpt"
    argv = ["train", "--tasks", str(smoke_run), "--output", str(out), "--quiet"]
    argv += ["--families", "code", "sql", "--steps", str(STEPS), "--seed", str(SEED)]
    argv += ["--prompts-per-step", str(PROMPTS), "--num-generations", str(GENERATIONS)]
    argv += ["--max-completion-length", "32", "--curriculum", "band", "--cpu-threads", "1"]
    assert main(argv) == 0
    return out


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _kept(curated: Path) -> dict[str, TaskRecord]:
    out = {}
    for f in sorted((curated / "tasks").rglob("*.parquet")):
        for row in pq.read_table(f).to_pylist():
            out[row["id"]] = CuratedTask.model_validate(row).task_record()
    return out


def test_every_completion_was_logged(trained: Path) -> None:
    rows = _jsonl(trained / COMPLETIONS_FILE)
    assert len(rows) == STEPS * PROMPTS * GENERATIONS
    assert sorted({r["step"] for r in rows}) == list(range(STEPS))


def test_solutions_are_extracted_as_the_samplers_do(smoke_run: Path, trained: Path) -> None:
    tasks = _kept(smoke_run)
    for row in _jsonl(trained / COMPLETIONS_FILE):
        task = tasks[row["task_id"]]
        entry = getattr(task.verifier, "entry_point", None)
        assert row["solution"] == extract_solution(row["completion"], task.family, entry)


def test_logged_rewards_are_tasksieve_verify_verdicts(
    smoke_run: Path, trained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks = _kept(smoke_run)
    rows = _jsonl(trained / COMPLETIONS_FILE)
    task_file = tmp_path / "tasks.jsonl"
    task_file.write_text("".join(t.model_dump_json() + "\n" for t in tasks.values()))
    sols = tmp_path / "solutions.jsonl"
    pairs = [{"task_id": r["task_id"], "solution": r["solution"]} for r in rows]
    sols.write_text("".join(json.dumps(p) + "\n" for p in pairs))
    capsys.readouterr()
    rc = main(["verify", "--task", str(task_file), "--solutions", str(sols), "--format", "json"])
    assert rc in (0, 1)  # every verdict pass, or some a wrong solution; never infra
    verdicts = _jsonl_text(capsys.readouterr().out)
    assert len(verdicts) == len(rows)
    for row, v in zip(rows, verdicts, strict=True):
        assert v["task_id"] == row["task_id"]
        assert (v["status"], v["tests_passed"], v["tests_total"]) == (
            row["status"],
            row["tests_passed"],
            row["tests_total"],
        )
        fields = {k: v[k] for k in Verdict.model_fields if k in v}
        want = reward(Verdict.model_validate(fields), tasks[row["task_id"]].reward)
        assert isinstance(want, Reward)
        assert row["reward"] == want.value


def test_logged_rewards_hold_both_a_pass_and_a_failure(trained: Path) -> None:
    rows = _jsonl(trained / COMPLETIONS_FILE)
    assert any(r["task_id"] == LENIENT_ID for r in rows), "the lenient task was not drawn"
    assert any(r["status"] == "pass" and r["reward"] > 0 for r in rows)
    assert any(r["status"] != "pass" and r["reward"] <= 0 for r in rows)


def _jsonl_text(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_trainer_reward_is_the_mean_of_the_logged_rewards(trained: Path) -> None:
    rows = _jsonl(trained / COMPLETIONS_FILE)
    metrics = [m for m in _jsonl(trained / METRICS_FILE) if "reward" in m]
    assert len(metrics) == STEPS
    for m in metrics:
        step_rewards = [r["reward"] for r in rows if r["step"] == m["step"] - 1]
        assert m["reward"] == pytest.approx(sum(step_rewards) / len(step_rewards))


def test_steps_log_generation_verification_and_families(trained: Path) -> None:
    families = {r["family"] for r in _jsonl(trained / COMPLETIONS_FILE)}
    for m in (m for m in _jsonl(trained / METRICS_FILE) if "reward" in m):
        assert m["tasksieve/generate_seconds"] > 0
        assert m["tasksieve/verify_seconds"] > 0
        assert 0 <= m["tasksieve/pass_rate"] <= 1
        assert m["completions/mean_length"] > 0
    logged = {k.split("/")[1] for m in _jsonl(trained / METRICS_FILE) for k in m if "/reward_" in k}
    assert logged == families


def test_checkpoint_loads_and_names_its_data(smoke_run: Path, trained: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    run_id = json.loads((smoke_run / "manifest.json").read_text())["run_id"]
    lineage = json.loads((trained / LINEAGE_FILE).read_text())
    assert lineage["tasks_run_id"] == run_id
    assert set(lineage["families"]) <= {"code", "sql"}
    model = AutoModelForCausalLM.from_pretrained(trained)
    assert model.config.tasksieve_lineage["tasks_run_id"] == run_id
    tok = AutoTokenizer.from_pretrained(trained)
    assert tok("def f():").input_ids
