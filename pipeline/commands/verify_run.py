"""Run ``tasksieve verify``: one solution, or a batch through one warm sandbox.

A batch is read twice: first every solution is checked (task found, file readable, row well
formed) and all problems are listed before anything runs; then the solutions go through a
thread pool that shares one sandbox and one ``VerifierCache`` (so each family's warm workers
start once). Consecutive solutions of one task, up to ``GROUP`` of them, go to the verifier
together: a family with ``verify_many`` (code) judges them in one sandbox entry where the
sandbox allows it, as the verify stage does. Verdicts are printed in input order as they
complete, at most ``2 x jobs`` groups ahead of the oldest unfinished one. A verifier that
raises gives its solutions an ``infra_error`` verdict instead of stopping the batch. Not
guarded against: solutions that are individually huge (each is held in memory while it runs).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TextIO, TypeVar

from tasksieve.pipeline.commands.verify import EXIT_FAIL, EXIT_INFRA, EXIT_PASS, EXIT_USAGE
from tasksieve.pipeline.commands.verify_inputs import (
    InputProblem,
    Resolver,
    Solution,
    UsageError,
    iter_solutions,
    load_task,
    load_tasks,
    solution_text,
)
from tasksieve.pipeline.flags.repo import snapshot_store
from tasksieve.schemas import Verdict
from tasksieve.transforms.ingest.files import InputError
from tasksieve.verifiers import SandboxUnavailable, UnsupportedFamily, make_sandbox
from tasksieve.verifiers.registry import VerifierCache

PROG = "tasksieve verify"
STATUSES = ("pass", "fail", "error", "timeout", "infra_error")
SHOWN_PROBLEMS = 20  # input problems listed before "... and N more"
GROUP = 8  # consecutive solutions of one task verified together (``--group``)
# Mistakes in flags, input or environment: one line on stderr and exit 2, never a traceback.
USER_ERRORS = (UsageError, InputError, UnsupportedFamily, SandboxUnavailable, ValueError, OSError)

T = TypeVar("T")
R = TypeVar("R")


def exit_code(counts: Counter[str]) -> int:
    """3 if any infra_error, else 1 if any verdict is not pass, else 0."""
    if counts["infra_error"]:
        return EXIT_INFRA
    return EXIT_FAIL if sum(counts.values()) != counts["pass"] else EXIT_PASS


def verdict_line(name: str, task_id: str, verdict: Verdict, fmt: str) -> str:
    """One solution's verdict as a JSON line or a text line."""
    if fmt == "json":
        return json.dumps({"name": name, "task_id": task_id, **verdict.model_dump()})
    text = f"{name}: {task_id}: {verdict.status} ({verdict.tests_passed}/{verdict.tests_total})"
    detail = verdict.detail.strip().splitlines()
    return f"{text}: {detail[0]}" if detail else text


def safe_verify(cache: VerifierCache, solution: Solution) -> Verdict:
    """The solution's verdict; a verifier that raises yields infra_error, not a crash."""
    try:
        return cache.get(solution.task.family).verify(solution.task, solution.text)
    except Exception as exc:  # a verifier bug is the environment's fault, not the solution's
        return Verdict(status="infra_error", detail=f"verifier raised {type(exc).__name__}: {exc}")


def groups(solutions: Iterable[Solution], most: int = GROUP) -> Iterator[list[Solution]]:
    """Runs of consecutive solutions of one task, at most ``most`` each, in input order."""
    run: list[Solution] = []
    for sol in solutions:
        if run and (sol.task.id != run[0].task.id or len(run) >= most):
            yield run
            run = []
        run.append(sol)
    if run:
        yield run


def safe_verify_group(cache: VerifierCache, group: list[Solution]) -> list[Verdict]:
    """Each solution's verdict, the group in one call where the family has ``verify_many``;
    a verifier that raises yields infra_error for each, not a crash."""
    if len(group) == 1:
        return [safe_verify(cache, group[0])]
    task = group[0].task
    try:
        many = getattr(cache.get(task.family), "verify_many", None)
        if many is None:
            return [safe_verify(cache, sol) for sol in group]
        verdicts: list[Verdict] = many(task, [sol.text for sol in group])
        return verdicts
    except Exception as exc:  # a verifier bug is the environment's fault, not the solutions'
        detail = f"verifier raised {type(exc).__name__}: {exc}"
        return [Verdict(status="infra_error", detail=detail) for _ in group]


def in_order(
    pool: ThreadPoolExecutor, fn: Callable[[T], R], items: Iterable[T], window: int
) -> Iterator[tuple[T, R]]:
    """``fn`` over ``items`` in the pool, yielded in input order, ``window`` in flight."""
    pending: deque[tuple[T, Future[R]]] = deque()
    for item in items:
        pending.append((item, pool.submit(fn, item)))
        if len(pending) >= window:
            first, fut = pending.popleft()
            yield first, fut.result()
    while pending:
        first, fut = pending.popleft()
        yield first, fut.result()


def _error(message: str) -> int:
    print(f"{PROG}: error: {message}", file=sys.stderr)
    return EXIT_USAGE


def run_single(args: argparse.Namespace) -> int:
    """``--solution FILE``: print one verdict (indented JSON by default)."""
    try:
        task = load_task(args.task, args.task_id)
        text = solution_text(args.solution)
        store = snapshot_store(args, [args.task])
        sandbox = make_sandbox(args.sandbox, allow_weak_isolation=args.allow_weak_isolation)
        cache = VerifierCache(sandbox, store)
        try:
            verdict = cache.get(task.family).verify(task, text)
        finally:
            cache.close()
            sandbox.close()
    except USER_ERRORS as e:
        return _error(str(e))
    if args.format == "json":
        print(json.dumps({"task_id": task.id, **verdict.model_dump()}, indent=2))
    else:
        print(verdict_line(args.solution, task.id, verdict, "text"))
    return exit_code(Counter([verdict.status]))


def check_solutions(source: str, resolver: Resolver, err: TextIO) -> tuple[int, set[str]]:
    """First pass: list input problems on ``err``; return their number and the families."""
    problems = 0
    families: set[str] = set()
    for item in iter_solutions(source, resolver):
        if isinstance(item, InputProblem):
            problems += 1
            if problems <= SHOWN_PROBLEMS:
                err.write(item.format() + "\n")
        else:
            families.add(item.task.family)
    if problems > SHOWN_PROBLEMS:
        err.write(f"... and {problems - SHOWN_PROBLEMS} more\n")
    return problems, families


def _summary(counts: Counter[str], seconds: float, jobs: int) -> str:
    total = sum(counts.values())
    parts = [f"{counts[s]} {s}" for s in STATUSES if counts[s] or s == "pass"]
    noun = "solution" if total == 1 else "solutions"
    return f"{PROG}: {total} {noun} in {seconds:.1f} s ({jobs} jobs): {', '.join(parts)}"


def _verify_all(
    source: str, resolver: Resolver, cache: VerifierCache, jobs: int, fmt: str, most: int = GROUP
) -> tuple[Counter[str], int]:
    """Second pass: verify and print every solution; return the counts and input problems."""
    counts: Counter[str] = Counter()
    late = 0  # problems the first pass did not see (the input changed meanwhile)

    def runnable() -> Iterator[Solution]:
        nonlocal late
        for item in iter_solutions(source, resolver):
            if isinstance(item, InputProblem):
                late += 1
                print(item.format(), file=sys.stderr)
            else:
                yield item

    def some(group: list[Solution]) -> list[Verdict]:
        return safe_verify_group(cache, group)

    with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="verify") as pool:
        try:
            for group, verdicts in in_order(pool, some, groups(runnable(), most), 2 * jobs):
                for sol, verdict in zip(group, verdicts, strict=True):
                    counts[verdict.status] += 1
                    sys.stdout.write(verdict_line(sol.name, sol.task.id, verdict, fmt) + "\n")
                sys.stdout.flush()
        except BaseException:  # interrupted or stdout closed: run nothing more
            pool.shutdown(wait=True, cancel_futures=True)
            raise
    return counts, late


def run_batch(args: argparse.Namespace) -> int:
    """``--solutions DIR|FILE``: verify every solution, print verdicts and a summary."""
    jobs = args.jobs or os.cpu_count() or 1
    try:
        resolver = Resolver(load_tasks(args.task), args.task_id)
        problems, families = check_solutions(args.solutions, resolver, sys.stderr)
    except UsageError as e:
        return _error(str(e))
    if problems:
        return _error(f"{problems} input problem(s) in {args.solutions}; nothing verified")
    if not families:
        return _error(f"{args.solutions}: no solutions")
    started = time.perf_counter()
    try:
        store = snapshot_store(args, [args.task])
        sandbox = make_sandbox(args.sandbox, allow_weak_isolation=args.allow_weak_isolation)
    except (SandboxUnavailable, ValueError) as e:
        return _error(str(e))
    cache = VerifierCache(sandbox, store)
    try:
        for family in sorted(families):
            cache.get(family)  # unsupported families fail here, before any solution runs
        counts, late = _verify_all(
            args.solutions, resolver, cache, jobs, args.format, getattr(args, "group", GROUP)
        )
    except UnsupportedFamily as e:
        return _error(str(e))
    except BrokenPipeError:  # the reader went away (e.g. `| head`): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_FAIL
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    finally:
        cache.close()
        sandbox.close()
    print(_summary(counts, time.perf_counter() - started, jobs), file=sys.stderr)
    if late:
        return _error(f"{late} input problem(s) appeared while verifying")
    return exit_code(counts)


def run(args: argparse.Namespace) -> int:
    """Entry point of ``tasksieve verify``; returns one of the EXIT_* codes."""
    if args.solutions is not None:
        return run_batch(args)
    return run_single(args)
