"""``RepoDiffer``: mutants of a repo task's reference patch, and the repository's other tests as
probes.

Mutants: every run of added lines (``+``) in a ``.py`` file of the reference patch is mutated
with the python family's operators (``families.python.mutation``: comparisons, arithmetic,
constants, returns, dropped statements, boolean operators), one change at a time; the mutant is
the reference patch with that run replaced, so it applies wherever the reference does. A run
that does not parse alone (a partial block) is tried line by line; a mutation that changes the
number of lines is dropped (the hunk counts would no longer hold).

Probes: the repository's other test files (``test_*.py`` / ``*_test.py`` in the snapshot),
each run whole after a solution; the observation is every test's outcome in that file. A
mutant that passes the task's tests but changes an outcome elsewhere in the suite is a
surviving mutant, and passing solutions that disagree there point at under-specified tests.

It does NOT guard against: behaviour no test of the repository exercises (a mutant that differs
only there counts as equivalent), or test files that are flaky by themselves (they disagree
with the reference as well, which the detectors see as a difference).
"""

from __future__ import annotations

import random
import re
import textwrap
from collections.abc import Iterator, Sequence
from pathlib import Path

from tasksieve.schemas import TaskRecord
from tasksieve.schemas.repo import RepoSpec
from tasksieve.verifiers.families.probes import Mutant, Observation, Probe, ProbeInfraError
from tasksieve.verifiers.families.python.mutation import all_mutants, select
from tasksieve.verifiers.families.python.verifier import AST_LOCK
from tasksieve.verifiers.families.repo.guest.patchapply import lines_of
from tasksieve.verifiers.families.repo.prompt import file_listing
from tasksieve.verifiers.families.repo.snapshots import SnapshotError, SnapshotStore
from tasksieve.verifiers.families.repo.verifier import RepoVerifier, TaskProblem
from tasksieve.verifiers.sandbox.base import Sandbox

_HUNK = re.compile(r"^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")
_TEST_FILE = re.compile(r"(?:^|/)(?:test_[^/]*|[^/]*_test)\.py$")
_WRAP = "def _mutated():\n"


def _added_runs(lines: list[str]) -> Iterator[tuple[str, int, int]]:
    """(file, first, end) of each run of added lines inside hunks of ``.py`` files."""
    path = ""
    old_left = new_left = 0
    i = 0
    while i < len(lines):
        line = lines[i]
        if old_left <= 0 and new_left <= 0:
            if line.startswith("+++ "):
                path = line[4:].split("\t", 1)[0].strip().removeprefix("b/")
            m = _HUNK.match(line)
            if m:
                old_left = int(m.group(1)) if m.group(1) is not None else 1
                new_left = int(m.group(2)) if m.group(2) is not None else 1
            i += 1
            continue
        if line.startswith("+"):
            start = i
            while i < len(lines) and lines[i].startswith("+") and new_left > 0:
                new_left -= 1
                i += 1
            if path.endswith(".py"):
                yield path, start, i
            continue
        if line.startswith("-"):
            old_left -= 1
        elif not line.startswith("\\"):
            old_left -= 1
            new_left -= 1
        i += 1


def _mutate_block(block: list[str]) -> list[tuple[Mutant, list[str]]]:
    """Mutants of ``block`` (source lines with newlines), each as the block's new lines."""
    text = "".join(block)
    body = textwrap.dedent(text)
    indent = text[: len(text) - len(text.lstrip(" \t"))] if text.strip() else ""
    indent = indent.split("\n")[-1]
    opens = body.rstrip().endswith(":")
    padded = body + "    pass\n" if opens else body
    wrapped = _WRAP + textwrap.indent(padded, "    ")
    out: list[tuple[Mutant, list[str]]] = []
    with AST_LOCK:
        made = all_mutants(wrapped)
    for m in made:
        new = m.solution.splitlines(keepends=True)[1:]
        new = [ln[4:] if ln.startswith("    ") else ln.lstrip() for ln in new]
        if opens:
            new = new[:-1]
        if len(new) != len(block):
            continue
        shifted = [indent + ln if ln.strip() else ln for ln in new]
        if shifted != block:
            out.append((m, shifted))
    return out


def patch_mutants(patch: str) -> list[Mutant]:
    """Every single-change mutant of the added Python lines of ``patch`` (module docstring)."""
    lines = lines_of(patch)
    out: list[Mutant] = []
    seen: set[str] = set()
    for path, start, end in _added_runs(lines):
        block = [ln[1:] for ln in lines[start:end]]
        spans = [(start, block)]
        if not _mutate_block(block):  # not parseable as a whole: line by line
            spans = [(start + k, [ln]) for k, ln in enumerate(block)]
        for at, part in spans:
            for m, new in _mutate_block(part):
                text = "".join([*lines[:at], *("+" + ln for ln in new), *lines[at + len(part) :]])
                if text == patch or text in seen:
                    continue
                seen.add(text)
                out.append(Mutant(m.operator, f"{path} (patch line {at + 1}): {m.where}", text))
    return out


class RepoDiffer:
    """Mutants, probes and observations for ``repo`` tasks (see the module docstring)."""

    family = "repo"
    separate_observations = True  # each solution's probe files run in a pytest run of its own

    def __init__(self, snapshot_store: str | None = None) -> None:
        self.store = SnapshotStore(snapshot_store) if snapshot_store else None

    def mutants(self, task: TaskRecord, limit: int, seed: int) -> list[Mutant]:
        """At most ``limit`` mutants of the reference patch's added lines."""
        return select(patch_mutants(task.reference_solution), limit, seed)

    def probes(self, task: TaskRecord, limit: int, seed: int) -> list[Probe]:
        """At most ``limit`` test files of the snapshot, sampled with ``seed``."""
        spec = task.verifier
        if not isinstance(spec, RepoSpec) or self.store is None:
            return []
        try:
            tree: Path = self.store.path(spec.snapshot)
        except SnapshotError:
            return []
        files = [f for f in file_listing(tree, limit=100_000) if _TEST_FILE.search(f)]
        if len(files) > limit:
            files = sorted(random.Random(seed).sample(files, limit))
        why = "a test file of the repository, run whole"
        return [Probe(f, f, origin="task", why=why, contracted=True, typical=True) for f in files]

    def observe(
        self, task: TaskRecord, solutions: Sequence[str], probes: Sequence[Probe], sandbox: Sandbox
    ) -> list[list[Observation]]:
        """Each solution's outcomes per probed test file (one run per solution)."""
        if not probes:
            return [[] for _ in solutions]
        verifier = RepoVerifier(sandbox, self.store)
        files = [str(p.payload) for p in probes]
        out: list[list[Observation]] = []
        for solution in solutions:
            try:
                status, outcomes = verifier.run_tests(task, solution, files)
            except TaskProblem as exc:
                raise ProbeInfraError(str(exc)) from exc
            if status == "infra":
                raise ProbeInfraError("the sandbox failed while running the repository's tests")
            row = []
            for f in files:
                mine = {t: o for t, o in outcomes.items() if t.split("::", 1)[0] == f}
                if status == "ran" and mine:
                    row.append(Observation.of(mine))
                else:
                    row.append(Observation(False, status if status != "ran" else "no_report"))
            out.append(row)
        return out

    def agree(self, task: TaskRecord, a: Observation, b: Observation) -> bool:
        """Same outcomes for every test of the file (or the same failure to run it)."""
        return a.ok == b.ok and a.value == b.value
