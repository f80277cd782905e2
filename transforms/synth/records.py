"""What imports and exports share: rejections with file, line and field, and field readers.

An import never stops at a bad record: each problem becomes a ``Rejection`` (the input file,
the record's line or row, the task id when known, the field and what is wrong), and the run
goes on with the next record.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tasksieve.verifiers.families.repo.snapshots import SnapshotStore


@dataclass(frozen=True)
class Rejection:
    """One record that was not imported (or exported), and why."""

    path: str
    line: int
    task_id: str
    field: str
    message: str

    def format(self) -> str:
        return f"{self.path}:{self.line}: {self.task_id}: {self.field}: {self.message}"

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False)


class RecordError(Exception):
    """A record's field is missing or wrong; ``field`` names it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def text_field(data: dict[str, Any], name: str, required: bool = True) -> str:
    """``data[name]`` as a non-empty string (``""`` when optional and absent)."""
    value = data.get(name)
    if value is None:
        if required:
            raise RecordError(name, "missing")
        return ""
    if not isinstance(value, str):
        raise RecordError(name, f"must be a string, got {type(value).__name__}")
    if required and not value.strip():
        raise RecordError(name, "empty")
    return value


def id_list(data: dict[str, Any], name: str, required: bool = True) -> list[str]:
    """A list of test ids: a real list of strings or, as SWE-bench stores it, its JSON text."""
    value = data.get(name)
    if value is None:
        if required:
            raise RecordError(name, "missing")
        return []
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else []
        except ValueError:
            raise RecordError(name, "not a JSON list of test ids") from None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise RecordError(name, "must be a list of test id strings")
    return list(value)


@contextmanager
def scratch_tree() -> Iterator[Path]:
    """A temporary directory removed afterwards."""
    tmp = Path(tempfile.mkdtemp(prefix="tasksieve-import-"))
    try:
        yield tmp
    finally:
        for dirpath, _dirs, _files in os.walk(tmp):
            os.chmod(dirpath, 0o755)
        shutil.rmtree(tmp, ignore_errors=True)


def apply_patch(tree: Path, patch: str, field: str) -> None:
    """Apply a unified diff inside ``tree`` with ``git apply`` (raises ``RecordError``)."""
    if not patch.strip():
        return
    proc = subprocess.run(
        ["git", "apply", "--whitespace=nowarn", "-"],
        cwd=tree,
        input=patch.encode("utf-8"),
        capture_output=True,
        timeout=120,
        env={**os.environ, "GIT_CEILING_DIRECTORIES": str(tree.parent)},
    )
    if proc.returncode != 0:
        why = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise RecordError(field, f"does not apply: {why[0] if why else proc.returncode}")


def store_with(
    store: SnapshotStore, fill: Callable[[Path], None], max_bytes: int | None = None
) -> str:
    """Fill a scratch tree with ``fill`` and put it in ``store``; return the reference."""
    with scratch_tree() as tmp:
        root = tmp / "tree"
        root.mkdir()
        fill(root)
        return store.put(root, max_bytes=max_bytes)
