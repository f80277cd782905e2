"""A small repository with a bug, its tests, a snapshot store and a ``repo`` task over it.

Shared by the repo family's tests: ``build_repo`` writes the package and its tests into a
directory, ``make_task`` stores it and returns the task with its reference patch.
"""

from __future__ import annotations

import difflib
from pathlib import Path

from tasksieve.schemas import TaskRecord
from tasksieve.verifiers.families.repo.guest.patchapply import lines_of
from tasksieve.verifiers.families.repo.snapshots import SnapshotStore

OPS_BUGGY = '''"""Arithmetic helpers."""


def add(a, b):
    return a + b


def sub(a, b):
    return a + b


def mul(a, b):
    return a * b
'''

OPS_FIXED = OPS_BUGGY.replace(
    "def sub(a, b):\n    return a + b", "def sub(a, b):\n    return a - b"
)

TESTS = """from mathlib.ops import add, mul, sub


def test_add():
    assert add(2, 3) == 5


def test_mul():
    assert mul(2, 3) == 6


def test_sub():
    assert sub(5, 3) == 2


def test_sub_negative():
    assert sub(3, 5) == -2
"""

EDITED_TESTS = TESTS.replace("assert sub(5, 3) == 2", "assert True").replace(
    "assert sub(3, 5) == -2", "assert True"
)
F2P = ["tests/test_ops.py::test_sub", "tests/test_ops.py::test_sub_negative"]
P2P = ["tests/test_ops.py::test_add", "tests/test_ops.py::test_mul"]


def build_repo(root: Path, tests: str = TESTS, extra: dict[str, str] | None = None) -> Path:
    """Write the package and its tests under ``root``; returns ``root``."""
    files = {
        "mathlib/__init__.py": "",
        "mathlib/ops.py": OPS_BUGGY,
        "tests/test_ops.py": tests,
        "README.md": "mathlib\n",
        **(extra or {}),
    }
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


def file_diff(rel: str, old: str | None, new: str | None) -> str:
    """A unified diff of one file (``None``: the file does not exist on that side)."""
    a = [] if old is None else lines_of(old)
    b = [] if new is None else lines_of(new)
    src = "/dev/null" if old is None else f"a/{rel}"
    dst = "/dev/null" if new is None else f"b/{rel}"
    return "".join(difflib.unified_diff(a, b, src, dst))


REFERENCE = file_diff("mathlib/ops.py", OPS_BUGGY, OPS_FIXED)


def make_task(
    store: SnapshotStore,
    tree: Path,
    task_id: str = "repo/mathlib-sub",
    f2p: list[str] | None = None,
    p2p: list[str] | None = None,
    reference: str = REFERENCE,
    **spec: object,
) -> TaskRecord:
    """Store ``tree`` and return a repo task over it."""
    ref = store.put(tree)
    return TaskRecord.model_validate(
        {
            "id": task_id,
            "family": "repo",
            "prompt": "sub(a, b) returns a + b; it must return a - b.",
            "reference_solution": reference,
            "verifier": {
                "family": "repo",
                "snapshot": ref,
                "fail_to_pass": F2P if f2p is None else f2p,
                "pass_to_pass": P2P if p2p is None else p2p,
                "timeout_s": 60.0,
                **spec,
            },
        }
    )
