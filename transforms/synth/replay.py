"""Recorded completions for synthesized repo tasks, for the replay sampler's demo runs.

For the first ``per_package`` tasks of each package in a task file, four completions: the
reference patch in a ```diff block (twice, with different prose), a patch that applies to the
snapshot but fixes nothing (a comment added to the file the bug is in), and an answer with
no patch at all. A replay run with four samples therefore sees two passes in four.

``python -m tasksieve.transforms.synth.replay --tasks repo.jsonl --append completions.jsonl``
first drops the rows of the tasks it writes for (so it can run again), keeping every other row
in its order.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from tasksieve.schemas import TaskRecord
from tasksieve.transforms.synth.diffs import file_diff
from tasksieve.verifiers.families.repo.snapshots import SnapshotStore


def completions(task: TaskRecord, store: SnapshotStore) -> list[str]:
    """Right, right, wrong (applies, fixes nothing) and unparsable completions for ``task``."""
    spec = task.verifier
    assert spec.family == "repo"
    synth = task.metadata.get("synth")
    path = str(synth["file"]) if isinstance(synth, dict) and "file" in synth else ""
    if not path:
        raise ValueError(f"{task.id}: no metadata.synth.file (not a synthesized task)")
    old = (store.path(spec.snapshot) / path).read_bytes()
    first, _, rest = old.partition(b"\n")
    new = first + b"\n# Looked into the failing tests here.\n" + rest
    wrong = file_diff(path, old, new)
    ref = task.reference_solution
    return [
        f"The failing tests point at one condition. Here is the fix:\n\n```diff\n{ref}```\n",
        f"```diff\n{ref}```\n\nThis restores the behaviour the tests expect.",
        f"I added a note where the problem probably is:\n\n```diff\n{wrong}```\n",
        "The tests seem to expect different behaviour; the package should be fixed so that "
        "they pass again, but I cannot tell where without running them.",
    ]


def rows(tasks: Sequence[TaskRecord], store: SnapshotStore, per_package: int) -> list[str]:
    """The JSON lines for the first ``per_package`` tasks of each package."""
    count: dict[str, int] = {}
    out: list[str] = []
    for t in tasks:
        pkg = t.source.dataset
        if count.get(pkg, 0) >= per_package:
            continue
        count[pkg] = count.get(pkg, 0) + 1
        out += [json.dumps({"task_id": t.id, "completion": c}) for c in completions(t, store)]
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tasksieve.transforms.synth.replay")
    p.add_argument("--tasks", required=True, help="repo task file (JSONL)")
    p.add_argument("--snapshot-store", default="examples/snapshots")
    p.add_argument("--append", required=True, metavar="FILE", help="replay completions file")
    p.add_argument("--per-package", type=int, default=2)
    args = p.parse_args(argv)
    text = Path(args.tasks).read_text(encoding="utf-8")
    tasks = [TaskRecord.model_validate_json(ln) for ln in text.splitlines() if ln.strip()]
    new = rows(tasks, SnapshotStore(args.snapshot_store), args.per_package)
    target = Path(args.append)
    ours = {json.loads(r)["task_id"] for r in new} | {t.id for t in tasks}
    kept = []
    if target.exists():
        for ln in target.read_text(encoding="utf-8").splitlines():
            if ln.strip() and json.loads(ln).get("task_id") not in ours:
                kept.append(ln)
    target.write_text("".join(ln + "\n" for ln in [*kept, *new]), encoding="utf-8")
    print(f"{len(new)} completions for {len(new) // 4} tasks appended to {target}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
