"""A small code task (``add(a, b)`` with three asserts) for the gate and retry tests."""

from __future__ import annotations

from tasksieve.schemas import TaskRecord
from tasksieve.transforms.runtime.items import Item

ASSERTS = ["assert add(1, 2) == 3", "assert add(0, 0) == 0", "assert add(-2, 5) == 3"]


def add_task(reference: str, asserts: list[str] = ASSERTS) -> TaskRecord:
    """The ``t.add`` task with ``reference`` as its reference solution."""
    return TaskRecord.model_validate(
        {
            "id": "t.add",
            "family": "code",
            "prompt": "Write add(a, b).",
            "verifier": {
                "family": "code",
                "style": "asserts",
                "entry_point": "add",
                "asserts": asserts,
            },
            "reference_solution": reference,
        }
    )


def item_of(task: TaskRecord) -> Item:
    """``task`` as read from line 1 of ``f.jsonl``."""
    return Item(task, "f.jsonl", 1, "0" * 64)
