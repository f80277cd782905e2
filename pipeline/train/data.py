"""The training data: a curate run's kept tasks, read with ``datasets`` and made into prompts.

``load_run`` finds the run (``tasksieve.pipeline.outputs.layout``), checks it is a curate
output of this schema version and returns it with its manifest; ``read_tasks`` reads
``tasks/**/*.parquet`` through the ``datasets`` Parquet loader and gives back each kept task
whole (``CuratedTask.task_record``), with its measured pass rate and the reference's runtime;
``prompt_rows`` turns tasks into the rows GRPO sees, with the chat messages the curation
samplers use (``tasksieve.transforms.samplers.prompts``).

What this does NOT check: that the shards agree with the manifest's counts (``tasksieve
check`` does), or that the tasks were not edited after the run (their lineage says which run
they came from, not that they are unchanged).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tasksieve.pipeline.outputs.layout import RunLayout
from tasksieve.schemas import FAMILIES, SCHEMA_VERSION, CodeSpec, CuratedTask, Manifest, TaskRecord
from tasksieve.transforms.samplers.config import SampleRequest
from tasksieve.transforms.samplers.prompts import render_messages
from tasksieve.verifiers.families.repo.prompt import render_prompt

# the columns read from the shards: everything CuratedTask.task_record needs, plus the scores
COLUMNS = (
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
    "pass_rate",
    "gates",
)
JSON_COLUMNS = ("verifier", "metadata", "reward")


class TrainInputError(Exception):
    """Bad training input (flags, run directory, shards): one line, nothing trained."""


@dataclass(frozen=True)
class TrainTask:
    """A kept task as training sees it."""

    task: TaskRecord
    pass_rate: float
    reference_s: float | None  # the slowest reference run of the gates (None if unknown)


def load_run(tasks: Path) -> tuple[Path, Manifest]:
    """The run to train on (``tasks``, or a publish root's current run) and its manifest.

    Raises the layout's ``NotAnOutput`` for a directory that is no curate output, and
    ``TrainInputError`` for a run of another schema version (checked before the fields, so an
    old run is named as such rather than by its first unknown field).
    """
    layout = RunLayout.find(tasks)
    version = layout.raw.get("schema_version")
    if version != SCHEMA_VERSION:
        raise TrainInputError(
            f"{layout.manifest_path}: schema_version {version!r}, this tasksieve reads "
            f"{SCHEMA_VERSION!r}; re-run `tasksieve curate` with this version"
        )
    return layout.run_dir, layout.manifest


def check_families(families: Sequence[str] | None) -> list[str] | None:
    """The ``--families`` list, refused when it names an unknown family."""
    if families is None:
        return None
    bad = [f for f in families if f not in FAMILIES]
    if bad:
        raise TrainInputError(
            f"unknown family {bad[0]!r} in --families (choose from {', '.join(FAMILIES)})"
        )
    return list(dict.fromkeys(families))


def _reference_s(gates: Any) -> float | None:
    for gate in gates or []:
        if gate.get("gate") == "reference_passes" and gate.get("duration_s"):
            return float(gate["duration_s"])
    return None


def read_tasks(run: Path, families: Sequence[str] | None = None) -> list[TrainTask]:
    """The run's kept tasks (of ``families``, if given), in shard order."""
    files = sorted(str(p) for p in (run / "tasks").rglob("*.parquet"))
    if not files:
        raise TrainInputError(f"{run}/tasks holds no Parquet shards: nothing to train on")
    import datasets

    datasets.disable_progress_bars()
    with tempfile.TemporaryDirectory(prefix="tasksieve-train-") as cache:
        try:
            ds = datasets.load_dataset(
                "parquet", data_files=files, split="train", cache_dir=cache, columns=list(COLUMNS)
            )
            rows = ds.to_list()
        except Exception as e:  # datasets raises many kinds; the message names the shard
            raise TrainInputError(f"cannot read {run}/tasks: {str(e).splitlines()[0]}") from None
    out = []
    for row in rows:
        if families is not None and row["family"] not in families:
            continue
        fields = {k: v for k, v in row.items() if k not in ("pass_rate", "gates")}
        for col in JSON_COLUMNS:  # datasets decodes Parquet JSON columns into objects
            if fields.get(col) is not None and not isinstance(fields[col], str):
                fields[col] = json.dumps(fields[col])
        try:
            task = CuratedTask.model_construct(**fields).task_record()
        except (ValueError, TypeError) as e:
            first = str(e).splitlines()[0]
            raise TrainInputError(f"task {row.get('id')!r} in {run}/tasks: {first}") from None
        out.append(TrainTask(task, float(row["pass_rate"]), _reference_s(row["gates"])))
    if not out:
        which = f" of families {', '.join(families)}" if families else ""
        raise TrainInputError(f"{run} has no kept tasks{which}: nothing to train on")
    return out


def entry_point(task: TaskRecord) -> str | None:
    spec = task.verifier
    return spec.entry_point if isinstance(spec, CodeSpec) else None


def messages(task: TaskRecord) -> list[dict[str, str]]:
    """The chat messages the curation samplers send for ``task``."""
    prompt = render_prompt(task)
    return render_messages(SampleRequest(task.id, task.family, prompt, entry_point(task)))


def prompt_rows(tasks: Sequence[TrainTask], order: Sequence[int]) -> list[dict[str, Any]]:
    """One GRPO dataset row per index in ``order``: the prompt plus what the reward needs."""
    rows = []
    for i in order:
        t = tasks[i]
        rows.append(
            {
                "prompt": messages(t.task),
                "task_id": t.task.id,
                "family": t.task.family,
                "task": t.task.model_dump_json(),
                "reference_s": t.reference_s,
                "pass_rate": t.pass_rate,
            }
        )
    return rows
