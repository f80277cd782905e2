"""Offline synthesis of ``repo`` tasks: inject one bug, see which tests catch it, write the task.

``synthesize`` runs the project's suite once in the sandbox (every collected test must pass or
be skipped), then tries single-site mutants of its source files, made by the ``code`` family's
mutation operators (``verifiers.families.python.mutation``: comparison, arithmetic, constant,
return value, dropped statement, boolean operator). A mutant becomes a task when the suite
still collects, at least one test that passed now fails (``fail_to_pass``), at most
``max_fail_fraction`` of the passing tests fail, and at least ``min_pass_to_pass`` tests pass
in both runs (``pass_to_pass``). The task's snapshot is the mutated tree, put in the snapshot
store; its reference solution is the inverse patch (mutated -> original); its statement is
built from the failing tests' own evidence (``evidence``), never from the diff. A mutant that
hits a limit (a loop) is dropped, and so is one whose failing tests repeat an earlier kept
task's set (two statements would be near duplicates).

Deterministic for a seed: the candidates of each file are shuffled and chosen by
``mutation.select`` with the seed, files are taken in turn, and the tests decide the rest (a
flaky test can still change a result; the repo family's gates catch that later).

It does NOT model: bugs that span files or lines, or module-level code (constants, imports).
"""

from __future__ import annotations

import hashlib
import random
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tasksieve.schemas import RepoEnvironment, RepoSpec, SourceInfo, TaskRecord
from tasksieve.transforms.synth.diffs import file_diff
from tasksieve.transforms.synth.evidence import failure_evidence, statement
from tasksieve.transforms.synth.project import Project
from tasksieve.verifiers.families.python.mutation import all_mutants, select
from tasksieve.verifiers.families.repo.snapshots import SnapshotStore
from tasksieve.verifiers.families.repo.suite import SuiteRun, run_suite, suite_limits
from tasksieve.verifiers.sandbox.base import Sandbox


class SynthError(Exception):
    """The project cannot be synthesized from (its suite fails, has no tests, ...); says why."""


@dataclass(frozen=True)
class SynthConfig:
    """How many tasks to make and what makes a mutant worth a task."""

    max_tasks: int = 10
    max_tries: int | None = None  # default: 6 x max_tasks
    seed: int = 0
    max_fail_fraction: float = 0.5
    min_pass_to_pass: int = 1
    max_pass_to_pass: int = 200
    max_fail_to_pass: int = 50
    test_args: tuple[str, ...] = ()
    requirements: tuple[str, ...] = ()
    timeout_s: float = 120.0
    id_prefix: str = "repo"

    def __post_init__(self) -> None:
        if self.max_tasks < 1:
            raise ValueError(f"need max_tasks >= 1, got {self.max_tasks}")
        if self.max_tries is not None and self.max_tries < 1:
            raise ValueError(f"need max_tries >= 1, got {self.max_tries}")
        if not 0 < self.max_fail_fraction <= 1:
            raise ValueError(f"need 0 < max_fail_fraction <= 1, got {self.max_fail_fraction}")
        if self.min_pass_to_pass < 0 or self.max_pass_to_pass < self.min_pass_to_pass:
            raise ValueError("need 0 <= min_pass_to_pass <= max_pass_to_pass")

    def tries(self) -> int:
        return self.max_tries if self.max_tries is not None else 6 * self.max_tasks


@dataclass
class SynthResult:
    """The tasks made and what happened to every mutant tried (``skipped``: reason -> count)."""

    tasks: list[TaskRecord] = field(default_factory=list)
    tried: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    baseline_tests: int = 0

    def skip(self, reason: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1


@dataclass(frozen=True)
class Candidate:
    """One mutant of one source file."""

    path: str
    operator: str
    where: str
    source: str


def candidates(project: Project, seed: int, per_file: int) -> Iterator[Candidate]:
    """Mutants of the source files: each file's chosen by ``select``, files taken in turn."""
    queues: list[list[Candidate]] = []
    for path in project.sources():
        try:
            text = project.files[path].decode("utf-8")
        except UnicodeDecodeError:
            continue
        salt = int.from_bytes(hashlib.sha256(f"{seed}:{path}".encode()).digest()[:4], "big")
        made = all_mutants(text)
        random.Random(salt).shuffle(made)  # select keeps the order when it takes them all
        made = select(made, per_file, salt)
        queues.append([Candidate(path, m.operator, m.where, m.solution) for m in made])
    while any(queues):
        for q in queues:
            if q:
                yield q.pop(0)


def baseline(sandbox: Sandbox, project: Project, cfg: SynthConfig) -> SuiteRun:
    """The unmutated suite's run; raises ``SynthError`` unless it collects and passes."""
    limits = suite_limits(cfg.timeout_s, tree_bytes=project.size())
    run = run_suite(sandbox, dict(project.files), limits=limits, test_args=cfg.test_args)
    if not run.collected:
        raise SynthError(f"{project.root}: the test suite does not run cleanly: {run.problem}")
    failing = sorted(t for t, o in run.outcomes.items() if o not in ("passed", "skipped"))
    if failing:
        shown = ", ".join(failing[:5]) + (" ..." if len(failing) > 5 else "")
        raise SynthError(
            f"{project.root}: {len(failing)} test(s) fail before any change ({shown}); "
            "synthesis needs a passing suite (deselect them with --test-arg=--deselect=ID)"
        )
    if not run.ids("passed"):
        raise SynthError(f"{project.root}: no test passes (all skipped?)")
    return run


def synthesize(
    project: Project,
    sandbox: Sandbox,
    store: SnapshotStore,
    cfg: SynthConfig,
    progress: Callable[[str], None] | None = None,
) -> SynthResult:
    """Make up to ``cfg.max_tasks`` repo tasks from ``project`` (see the module docstring)."""
    base = baseline(sandbox, project, cfg)
    passed = set(base.ids("passed"))
    result = SynthResult(baseline_tests=len(passed))
    limits = suite_limits(  # a mutant that loops costs this, not the whole task timeout
        min(cfg.timeout_s, max(30.0, 10 * base.duration_s)), tree_bytes=project.size()
    )
    seen_sets: set[tuple[str, ...]] = set()
    per_file = max(cfg.tries(), 1)
    for cand in candidates(project, cfg.seed, per_file):
        if len(result.tasks) >= cfg.max_tasks or result.tried >= cfg.tries():
            break
        result.tried += 1
        files = dict(project.files)
        files[cand.path] = cand.source.encode("utf-8")
        run = run_suite(sandbox, files, limits=limits, test_args=cfg.test_args)
        verdict = _judge(run, passed, cfg)
        if isinstance(verdict, str):
            result.skip(verdict)
            continue
        f2p, p2p = verdict
        if tuple(f2p) in seen_sets:
            result.skip("same failing tests as a kept task")
            continue
        seen_sets.add(tuple(f2p))
        task = _task(project, store, cfg, cand, run, f2p, p2p, files)
        result.tasks.append(task)
        if progress:
            progress(f"{task.id}: {len(f2p)} fail_to_pass, {len(p2p)} pass_to_pass")
    return result


def _judge(run: SuiteRun, passed: set[str], cfg: SynthConfig) -> str | tuple[list[str], list[str]]:
    """(fail_to_pass, pass_to_pass) of a mutant's run, or why it makes no task."""
    if run.infra_error:
        raise SynthError(f"the sandbox failed: {run.infra_error}")
    if run.limit_hit:
        return f"hit the {run.limit_hit} limit"
    if not run.collected:
        return "suite no longer collects"
    f2p = sorted(t for t in passed if run.outcomes.get(t) in ("failed", "error", "missing"))
    p2p = sorted(t for t in passed if run.outcomes.get(t) == "passed")
    if not f2p:
        return "no test fails"
    if len(f2p) > cfg.max_fail_fraction * len(passed):
        return "too many tests fail"
    if len(p2p) < max(cfg.min_pass_to_pass, 1):
        return "too few tests still pass"
    if len(f2p) > cfg.max_fail_to_pass:
        f2p = _sample(f2p, cfg.max_fail_to_pass, cfg.seed)
    if len(p2p) > cfg.max_pass_to_pass:
        p2p = _sample(p2p, cfg.max_pass_to_pass, cfg.seed)
    return f2p, p2p


def _sample(ids: list[str], n: int, seed: int) -> list[str]:
    return sorted(random.Random(seed).sample(ids, n))


def _task(
    project: Project,
    store: SnapshotStore,
    cfg: SynthConfig,
    cand: Candidate,
    run: SuiteRun,
    f2p: list[str],
    p2p: list[str],
    files: dict[str, bytes],
) -> TaskRecord:
    ref = store_tree(store, files)
    info = project.info
    evidence = failure_evidence(run.output, f2p[:3], project.test_files)
    spec = RepoSpec(
        snapshot=ref,
        environment=RepoEnvironment(requirements=list(cfg.requirements)),
        test_args=list(cfg.test_args),
        fail_to_pass=f2p,
        pass_to_pass=p2p,
        test_files=list(project.test_files),
        timeout_s=cfg.timeout_s,  # not from measured times: the record stays deterministic
    )
    name = "".join(c if c.isalnum() else "_" for c in info.name.lower())
    tid = f"{cfg.id_prefix}.{name}.{ref.removeprefix('sha256:')[:12]}"
    patch = file_diff(cand.path, files[cand.path], project.files[cand.path])
    return TaskRecord(
        id=tid,
        family="repo",
        prompt=statement(info, evidence, f2p),
        verifier=spec,
        reference_solution=patch,
        source=SourceInfo(
            dataset=f"synth:{info.name}=={info.version}", license=info.license, url=info.url
        ),
        tags=["repo", "synthesized", f"package:{info.name}", f"mutation:{cand.operator}"],
        metadata={
            "package": {"name": info.name, "version": info.version, "license": info.license},
            "synth": {"seed": cfg.seed, "operator": cand.operator, "file": cand.path},
        },
    )


def store_tree(store: SnapshotStore, files: dict[str, bytes]) -> str:
    """Write ``files`` to a temporary tree, put it in ``store``, return its reference."""
    tmp = Path(tempfile.mkdtemp(prefix="tasksieve-synth-"))
    try:
        for rel, data in files.items():
            p = tmp / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data)
        return store.put(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
