"""``tasksieve verify``: run one solution against one task and print the verdict as JSON."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from schemas import TaskRecord
from schemas.validation import validate_record
from transforms.sources import InputError, iter_source_records
from verifiers import SandboxUnavailable, UnsupportedFamily
from verifiers.registry import get_verifier, make_sandbox


class UsageError(Exception):
    """A user mistake: print it on one line and exit 2."""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "verify",
        help="run one solution against one task, print the verdict as JSON",
        description="Exit 0 when the verdict is pass, 1 when it is fail/error/timeout, "
        "2 for usage errors, 3 when the environment broke (infra_error).",
    )
    p.add_argument("--task", required=True, help="task file: JSON object, or JSONL/Parquet")
    p.add_argument("--task-id", help="which task of a multi-record file")
    p.add_argument("--solution", required=True, help="file with the solution text ('-': stdin)")
    p.add_argument("--sandbox", default="process", help="sandbox backend (default: process)")
    p.add_argument("--allow-weak-isolation", action="store_true")


def load_task(path: str, task_id: str | None) -> TaskRecord:
    if not Path(path).is_file():
        raise UsageError(f"{path}: no such file")
    seen = []
    for rec in iter_source_records(path):
        if rec.data is None:
            raise UsageError(f"{rec.source_file}:{rec.line}: {rec.error}")
        rid = rec.data.get("id")
        seen.append(str(rid))
        if task_id is not None and rid != task_id:
            continue
        task, problems = validate_record(rec.source_file, rec.line, rec.data, rec.error)
        if task is None:
            raise UsageError("; ".join(p.format() for p in problems))
        return task
    if task_id is None:
        raise UsageError(f"{path}: no task in file")
    raise UsageError(f"{path}: no task with id {task_id!r} (ids: {', '.join(seen[:10])})")


def run(args: argparse.Namespace) -> int:
    try:
        task = load_task(args.task, args.task_id)
        if args.solution == "-":
            solution = sys.stdin.read()
        else:
            sol = Path(args.solution)
            if not sol.is_file():
                raise UsageError(f"{args.solution}: no such file")
            solution = sol.read_text(encoding="utf-8")
        sandbox = make_sandbox(args.sandbox, allow_weak_isolation=args.allow_weak_isolation)
        try:
            verdict = get_verifier(task.family, sandbox).verify(task, solution)
        finally:
            sandbox.close()
    except (
        UsageError,
        InputError,
        UnsupportedFamily,
        SandboxUnavailable,
        UnicodeDecodeError,
        ValueError,
        OSError,
    ) as exc:
        print(f"tasksieve verify: error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps({"task_id": task.id, **verdict.model_dump()}, indent=2))
    if verdict.status == "infra_error":
        return 3
    return 0 if verdict.passed else 1
