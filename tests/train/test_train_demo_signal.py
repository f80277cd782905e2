"""The learning-signal preconditions of `make train-demo`, on a tiny run of the same recipe.

The bundled model's own pass rates pick the tasks (curate with the embedded sampler, kept
when 0 < p < 1); one GRPO step on them, completions ending at the closing fence, must then
have a prompt group whose rewards differ, a non-zero gradient and answers that finished
inside the budget. Nothing here is timed.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tasksieve.pipeline.cli import main
from tasksieve.pipeline.train.data import read_tasks
from tasksieve.pipeline.train.run import METRICS_FILE

pytestmark = [pytest.mark.train, pytest.mark.slow]

DEMO = Path(__file__).resolve().parents[2] / "examples" / "train-demo" / "tasks.jsonl"
# four demo tasks the 135M model solves about half the time (docs/train/demo.md)
PICK = ("demo.code.multiply", "demo.code.shout", "demo.code.string_length", "demo.sql.count_people")
GEN = ["--temperature", "1.0", "--top-p", "1.0", "--max-new-tokens", "96"]


def test_tasks_picked_by_the_models_pass_rate_give_groups_with_reward_spread(
    tmp_path: Path,
) -> None:
    pytest.importorskip("trl")
    from tasksieve.transforms.samplers.model_cache import bundled_gguf

    try:
        bundled_gguf()
    except FileNotFoundError as e:
        pytest.skip(str(e))
    inputs = tmp_path / "in"
    inputs.mkdir()
    rows = [line for line in DEMO.read_text().splitlines() if json.loads(line)["id"] in PICK]
    (inputs / "tasks.jsonl").write_text("\n".join(rows) + "\n")
    curated = tmp_path / "tasks"
    argv = ["curate", "--input", str(inputs), "--output", str(curated), "--quiet", "--no-cache"]
    argv += ["--samples", "4", *GEN, "--too-hard", "0", "--too-easy", "1", "--no-weak-tests"]
    assert main(argv) == 0
    kept = read_tasks(curated)
    assert kept, "no demo task was in the band: the demo would have nothing to train on"
    assert all(0 < t.pass_rate < 1 for t in kept), [(t.task.id, t.pass_rate) for t in kept]

    ckpt = tmp_path / "ckpt"
    argv = ["train", "--tasks", str(curated), "--output", str(ckpt), "--quiet"]
    argv += ["--steps", "1", "--prompts-per-step", "2", "--num-generations", "4"]
    argv += ["--max-completion-length", "96", "--end-at-fence", "--curriculum", "band"]
    argv += ["--cpu-threads", "1", "--seed", "1"]
    assert main(argv) == 0
    (step,) = [r for r in map(json.loads, (ckpt / METRICS_FILE).open()) if "reward" in r]
    assert step["frac_reward_zero_std"] < 1, step  # some group's rewards differ
    assert step["grad_norm"] > 0, step
    assert step["completions/clipped_ratio"] < 1, step  # answers ended before the budget
    shutil.rmtree(ckpt)  # the checkpoint is 500 MB; do not leave it to the end of the session
