"""What a model sees of a repo task: the problem statement and a listing of the repository.

The gates record the snapshot's file listing in the task's metadata (``repo_files``, at most
``MAX_LISTED`` paths, test files included) once the snapshot is known to be good; sampling and
training both render the prompt from the task alone with ``render_prompt``, so they agree
without reaching the snapshot store. The file contents are not in the prompt: a model that
needs them works in a workspace (an agent) or must infer them from the statement.
"""

from __future__ import annotations

import os
from pathlib import Path

from tasksieve.schemas import TaskRecord

MAX_LISTED = 400
LISTING_KEY = "repo_files"
_SKIP = frozenset({".git", "__pycache__", ".pytest_cache"})


def file_listing(tree: Path, limit: int = MAX_LISTED) -> list[str]:
    """The tree's file paths, sorted, at most ``limit`` (a last entry says how many more)."""
    paths: list[str] = []
    for dirpath, dirnames, filenames in os.walk(tree):
        dirnames[:] = [d for d in dirnames if d not in _SKIP]
        for name in filenames:
            paths.append((Path(dirpath) / name).relative_to(tree).as_posix())
    paths.sort()
    if len(paths) > limit:
        return [*paths[:limit], f"... and {len(paths) - limit} more files"]
    return paths


def render_prompt(task: TaskRecord) -> str:
    """The statement, then the file listing when the task carries one (other families: the
    prompt as it is)."""
    files = task.metadata.get(LISTING_KEY) if task.family == "repo" else None
    if not isinstance(files, list) or not files:
        return task.prompt
    listing = "\n".join(str(f) for f in files)
    return (
        f"{task.prompt.rstrip()}\n\nRepository files:\n{listing}\n\n"
        "Answer with a unified diff against the repository root (a/ and b/ paths)."
    )
