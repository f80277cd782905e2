"""``tasksieve import`` and ``tasksieve export``: repo tasks from and to SWE-bench and Harbor.

``import swebench`` reads SWE-bench-shaped records (JSONL, JSON, Parquet, a ``datasets``
directory) whose repositories are local git repositories under ``--repos``; ``import harbor``
reads Harbor task directories. ``export swebench`` and ``export harbor`` write repo tasks back
out. Every record that cannot be converted is a rejection, ``path:line: task_id: field:
message`` on stdout (and a JSON line in ``--rejected`` when given); the run goes on.

The top level imports the standard library only (the CLI builds its parser from here).

Exit status: 0 every record converted, 1 some record rejected, 2 usage or input error.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tasksieve.pipeline.flags.shared import positive_int

if TYPE_CHECKING:
    from tasksieve.schemas import TaskRecord
    from tasksieve.transforms.synth.records import Rejection

_EPILOG = """\
rejections: one line each on stdout, path:line: task_id: field: message (line is the
record's line or row; 1 for a Harbor directory's file), and as JSON lines in --rejected.

exit status: 0 all converted, 1 some record rejected, 2 usage or input error
"""


def _common(p: argparse.ArgumentParser, store_required: bool = True) -> None:
    p.add_argument("--snapshot-store", required=store_required, metavar="DIR")
    p.add_argument("--rejected", metavar="FILE.jsonl", help="write rejections here as JSON")
    p.add_argument(
        "--max-snapshot-mb",
        type=positive_int,
        default=256,
        metavar="MB",
        help="a repository tree over this is rejected (default 256)",
    )


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``import`` and ``export`` with their ``swebench`` and ``harbor`` kinds."""
    fmt = argparse.RawDescriptionHelpFormatter
    imp = sub.add_parser("import", help="import repo tasks (SWE-bench records, Harbor dirs)")
    kinds = imp.add_subparsers(dest="io_kind", required=True, metavar="FORMAT")
    sw = kinds.add_parser(
        "swebench",
        help="SWE-bench-shaped records with local repositories",
        epilog=_EPILOG,
        formatter_class=fmt,
    )
    sw.add_argument("paths", nargs="+", metavar="FILE_OR_DATASET_DIR")
    sw.add_argument("--repos", metavar="DIR", help="local git repositories (owner__name)")
    sw.add_argument("--output", required=True, metavar="FILE.jsonl")
    sw.add_argument("--dataset", default="swebench", help="source.dataset of the tasks")
    _common(sw)
    hb = kinds.add_parser(
        "harbor", help="Harbor task directories", epilog=_EPILOG, formatter_class=fmt
    )
    hb.add_argument("paths", nargs="+", metavar="DIR", help="task dirs or dirs holding them")
    hb.add_argument("--repos", metavar="DIR", help="for SWE-bench-adapter tasks without a tree")
    hb.add_argument("--output", required=True, metavar="FILE.jsonl")
    _common(hb)
    imp.set_defaults(func=run_import)

    exp = sub.add_parser("export", help="export repo tasks (SWE-bench records, Harbor dirs)")
    ekinds = exp.add_subparsers(dest="io_kind", required=True, metavar="FORMAT")
    esw = ekinds.add_parser(
        "swebench", help="SWE-bench-shaped JSONL", epilog=_EPILOG, formatter_class=fmt
    )
    esw.add_argument("paths", nargs="+", metavar="TASKS")
    esw.add_argument("--output", required=True, metavar="FILE.jsonl")
    _common(esw, store_required=False)
    ehb = ekinds.add_parser(
        "harbor", help="one Harbor task directory per task", epilog=_EPILOG, formatter_class=fmt
    )
    ehb.add_argument("paths", nargs="+", metavar="TASKS")
    ehb.add_argument("--output", required=True, metavar="DIR")
    _common(ehb)
    exp.set_defaults(func=run_export)


def _prog(args: argparse.Namespace) -> str:
    return f"tasksieve {args.command} {args.io_kind}"


def _finish(args: argparse.Namespace, done: int, rejected: list[Rejection]) -> int:
    for r in rejected:
        print(r.format())
    if args.rejected:
        Path(args.rejected).write_text("".join(r.to_json() + "\n" for r in rejected))
    print(f"{_prog(args)}: {done} converted, {len(rejected)} rejected", file=sys.stderr)
    return 1 if rejected else 0


def _swebench_records(paths: list[str]) -> Iterator[tuple[str, int, dict[str, Any] | None, str]]:
    from tasksieve.transforms.ingest.files import expand_inputs
    from tasksieve.transforms.ingest.readers import iter_source_records

    for path in expand_inputs(paths):
        for rec in iter_source_records(path):
            yield rec.source_file, rec.line, rec.data, rec.error or ""


def run_import(args: argparse.Namespace) -> int:
    """Run ``import swebench`` or ``import harbor``; return the exit status."""
    from tasksieve.transforms.ingest.files import InputError
    from tasksieve.transforms.synth import harbor, swebench
    from tasksieve.transforms.synth.records import RecordError, Rejection
    from tasksieve.verifiers.families.repo.snapshots import SnapshotStore

    store = SnapshotStore(args.snapshot_store)
    repos = Path(args.repos) if args.repos else None
    if repos is not None and not repos.is_dir():
        print(f"{_prog(args)}: error: --repos {repos}: not a directory", file=sys.stderr)
        return 2
    limit = args.max_snapshot_mb * 1024 * 1024
    tasks: list[TaskRecord] = []
    rejected: list[Rejection] = []
    seen: set[str] = set()

    def keep(task: TaskRecord, where: tuple[str, int]) -> None:
        if task.id in seen:
            rejected.append(Rejection(*where, task.id, "id", "duplicate id"))
        else:
            seen.add(task.id)
            tasks.append(task)

    try:
        if args.io_kind == "swebench":
            for path, line, data, error in _swebench_records(args.paths):
                tid = str((data or {}).get("instance_id", "-"))
                if data is None:
                    rejected.append(Rejection(path, line, "-", "-", error or "not an object"))
                    continue
                try:
                    task = swebench.import_record(data, repos, store, args.dataset, limit)
                    keep(task, (path, line))
                except RecordError as e:
                    rejected.append(Rejection(path, line, tid, e.field, e.message))
        else:
            dirs = harbor.task_dirs([Path(p) for p in args.paths])
            if not dirs:
                raise InputError(f"no Harbor task directory (with task.toml) in {args.paths}")
            for d in dirs:
                try:
                    keep(harbor.import_task(d, repos, store, limit), (str(d / "task.toml"), 1))
                except RecordError as e:
                    rejected.append(Rejection(str(d / "task.toml"), 1, d.name, e.field, e.message))
    except InputError as e:
        print(f"{_prog(args)}: error: {e}", file=sys.stderr)
        return 2
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(t.model_dump_json() + "\n" for t in tasks), encoding="utf-8")
    return _finish(args, len(tasks), rejected)


def run_export(args: argparse.Namespace) -> int:
    """Run ``export swebench`` or ``export harbor``; return the exit status."""
    import json

    from tasksieve.schemas.validation import validate_record
    from tasksieve.transforms.ingest.files import InputError
    from tasksieve.transforms.synth import harbor, swebench
    from tasksieve.transforms.synth.records import RecordError, Rejection
    from tasksieve.verifiers.families.repo.snapshots import SnapshotStore

    store = SnapshotStore(args.snapshot_store) if args.snapshot_store else None
    rejected: list[Rejection] = []
    lines: list[str] = []
    out = Path(args.output)
    if args.io_kind == "harbor":
        out.mkdir(parents=True, exist_ok=True)
    try:
        for path, line, data, error in _swebench_records(args.paths):
            task, problems = validate_record(path, line, data, error or None)
            if task is None:
                p = problems[0]
                rejected.append(Rejection(path, line, p.task_id, p.field, p.message))
                continue
            try:
                if args.io_kind == "swebench":
                    lines.append(json.dumps(swebench.export_record(task), ensure_ascii=False))
                else:
                    assert store is not None
                    harbor.export_task(task, store, out)
                    lines.append(task.id)
            except RecordError as e:
                rejected.append(Rejection(path, line, task.id, e.field, e.message))
    except InputError as e:
        print(f"{_prog(args)}: error: {e}", file=sys.stderr)
        return 2
    if args.io_kind == "swebench":
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("".join(ln + "\n" for ln in lines), encoding="utf-8")
    return _finish(args, len(lines), rejected)
