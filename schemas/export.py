"""Export the JSON Schemas of every record into ``schemas/*.schema.json``.

Run ``python -m schemas.export`` after changing a model; a test fails when the files are stale.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from tasksieve.schemas.records import (
    CuratedTask,
    Manifest,
    RejectedRecord,
    Rollout,
    TrajectoryStep,
    Verdict,
)
from tasksieve.schemas.task import SCHEMA_VERSION, TaskRecord

HERE = Path(__file__).resolve().parent

EXPORTS: dict[str, type[BaseModel]] = {
    "task.schema.json": TaskRecord,
    "verdict.schema.json": Verdict,
    "rollout.schema.json": Rollout,
    "trajectory.schema.json": TrajectoryStep,
    "curated_task.schema.json": CuratedTask,
    "rejected.schema.json": RejectedRecord,
    "manifest.schema.json": Manifest,
}


def render(model: type[BaseModel]) -> str:
    doc: dict[str, Any] = model.model_json_schema()
    doc = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"tasksieve/{model.__name__}/{SCHEMA_VERSION}",
        **doc,
    }
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def main() -> None:
    for name, model in EXPORTS.items():
        (HERE / name).write_text(render(model), encoding="utf-8")
        print(f"wrote schemas/{name}")


if __name__ == "__main__":
    main()
