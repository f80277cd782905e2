"""What ``tasksieve verify`` reads: the task file, and solutions from a directory or a file.

Every mistake in the input becomes an ``InputProblem`` naming ``FILE[:LINE]`` rather than an
exception, so a batch can list them all before anything runs. Reading solutions is a
generator that can be run twice (once to check, once to verify), so memory stays flat in the
number of solutions; a file changed between the two passes is not guarded against beyond
reporting what the second pass finds.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tasksieve.schemas import TaskRecord
from tasksieve.schemas.validation import record_id, validate_record
from tasksieve.transforms.ingest.files import InputError
from tasksieve.transforms.ingest.readers import iter_source_records


class UsageError(Exception):
    """A user mistake that stops the command: printed on one line, exit 2."""


@dataclass(frozen=True)
class InputProblem:
    """One thing wrong with the input, at ``where`` (``FILE`` or ``FILE:LINE``)."""

    where: str
    message: str

    def format(self) -> str:
        return f"{self.where}: {self.message}"


@dataclass(frozen=True)
class Solution:
    """One solution to verify: its name in the output, its task and its text."""

    name: str
    task: TaskRecord
    text: str


def load_task(path: str, task_id: str | None) -> TaskRecord:
    """The task ``task_id`` of ``path`` (its first record when None), read up to the match."""
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


@dataclass
class TaskTable:
    """Every task of a task file by id; invalid and duplicate records are kept as problems."""

    path: str
    tasks: dict[str, TaskRecord] = field(default_factory=dict)
    lines: dict[str, list[int]] = field(default_factory=dict)
    invalid: dict[str, str] = field(default_factory=dict)
    records: int = 0
    only: TaskRecord | str | None = None  # the task (or why it is unusable) of a 1-task file

    def resolve(self, task_id: str) -> TaskRecord | str:
        """The task with this id, or why there is none usable."""
        lines = self.lines.get(task_id)
        if lines is None:
            return f"unknown task id {task_id!r} (not in {self.path})"
        if len(lines) > 1:
            where = ", ".join(str(n) for n in lines)
            return f"task id {task_id!r} appears more than once in {self.path} (lines {where})"
        if task_id in self.invalid:
            return f"task {task_id!r} at {self.path}:{lines[0]} is invalid: {self.invalid[task_id]}"
        return self.tasks[task_id]


def load_tasks(path: str) -> TaskTable:
    """Read every task of ``path``; a record that does not parse at all is a UsageError."""
    if not Path(path).is_file():
        raise UsageError(f"{path}: no such file")
    table = TaskTable(path)
    try:
        for rec in iter_source_records(path):
            if rec.data is None:
                raise UsageError(f"{rec.source_file}:{rec.line}: {rec.error}")
            table.records += 1
            task, problems = validate_record(rec.source_file, rec.line, rec.data, rec.error)
            why = "; ".join(f"{p.field}: {p.message}" for p in problems)
            if table.records == 1:
                table.only = task or f"the task at {path}:{rec.line} is invalid: {why}"
            rid = record_id(rec.data)
            if rid is None:
                continue
            table.lines.setdefault(rid, []).append(rec.line)
            if task is None:
                table.invalid[rid] = why
            else:
                table.tasks[rid] = task
    except InputError as exc:
        raise UsageError(str(exc)) from None
    if table.records == 0:
        raise UsageError(f"{path}: no task in file")
    if table.records > 1:
        table.only = None
    return table


@dataclass(frozen=True)
class Resolver:
    """Which task a solution belongs to: ``--task-id``, the only task, or a named id."""

    table: TaskTable
    forced: str | None

    def default(self) -> TaskRecord | str | None:
        """The task every solution gets without naming one, or None when it must name one."""
        if self.forced is not None:
            return self.table.resolve(self.forced)
        return self.table.only

    def named(self, task_id: str) -> TaskRecord | str:
        if self.forced is not None and task_id != self.forced:
            return f"names task {task_id!r} but --task-id is {self.forced!r}"
        return self.table.resolve(task_id)


def _read_text(path: Path) -> str | InputProblem:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        return InputProblem(str(path), f"not UTF-8 (byte 0x{e.object[e.start]:02x} at {e.start})")
    except OSError as e:
        return InputProblem(str(path), f"cannot read ({e.strerror or e})")


def _file_solution(path: Path, name: str, task: TaskRecord | str) -> Solution | InputProblem:
    if isinstance(task, str):
        return InputProblem(str(path), task)
    text = _read_text(path)
    if isinstance(text, InputProblem):
        return text
    return Solution(name, task, text)


def _visible(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if not p.name.startswith("."))


def _dir_solutions(root: Path, resolver: Resolver) -> Iterator[Solution | InputProblem]:
    default = resolver.default()
    for entry in _visible(root):
        if entry.is_dir():
            task = resolver.named(entry.name)
            for f in _visible(entry):
                if not f.is_file():
                    yield InputProblem(str(f), "not a file (folders nest one level: DIR/TASK_ID/)")
                    continue
                yield _file_solution(f, f"{entry.name}/{f.name}", task)
        elif not entry.is_file():
            yield InputProblem(str(entry), "not a regular file")
        elif default is not None:
            yield _file_solution(entry, entry.name, default)
        else:
            stem = entry.name.rsplit(".", 1)[0] if "." in entry.name else entry.name
            task = resolver.table.resolve(stem)
            if isinstance(task, str):
                task = (
                    f"no task with id {stem!r} in {resolver.table.path} (name the file "
                    "TASK_ID.EXT, put it in a folder TASK_ID/, or pass --task-id)"
                )
            yield _file_solution(entry, entry.name, task)


def _row_solution(
    where: str, data: dict[str, object], resolver: Resolver
) -> Solution | InputProblem:
    text = data.get("solution")
    if not isinstance(text, str):
        return InputProblem(where, "field 'solution' missing or not a string")
    name = data.get("name")
    if name is not None and not isinstance(name, str):
        return InputProblem(where, "field 'name' must be a string")
    tid = data.get("task_id")
    task: TaskRecord | str | None
    if tid is None:
        task = resolver.default()
        if task is None:
            task = (
                f"field 'task_id' missing ({resolver.table.path} holds "
                f"{resolver.table.records} tasks; or pass --task-id)"
            )
    elif not isinstance(tid, str):
        task = "field 'task_id' must be a string"
    else:
        task = resolver.named(tid)
    if isinstance(task, str):
        return InputProblem(where, task)
    return Solution(name or where, task, text)


def _file_rows(path: str, resolver: Resolver) -> Iterator[Solution | InputProblem]:
    try:
        for rec in iter_source_records(path):
            where = f"{rec.source_file}:{rec.line}"
            if rec.data is None:
                yield InputProblem(where, rec.error or "not a JSON object")
            else:
                yield _row_solution(where, rec.data, resolver)
    except InputError as exc:
        yield InputProblem(path, str(exc).removeprefix(f"{path}: "))


def iter_solutions(source: str, resolver: Resolver) -> Iterator[Solution | InputProblem]:
    """Every solution of ``source`` (a directory or a rows file) in a stable order."""
    path = Path(source)
    if path.is_dir():
        yield from _dir_solutions(path, resolver)
    elif path.is_file():
        yield from _file_rows(source, resolver)
    else:
        yield InputProblem(source, "no such file or directory")


def solution_text(source: str) -> str:
    """The text of ``--solution`` (``-`` reads standard input)."""
    import sys

    if source == "-":
        return sys.stdin.read()
    path = Path(source)
    if not path.is_file():
        raise UsageError(f"{source}: no such file")
    text = _read_text(path)
    if isinstance(text, InputProblem):
        raise UsageError(text.format())
    return text
