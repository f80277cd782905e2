"""A task's samples verified together: one ``verify_many`` per part, then retries alone.

``verify_batch`` is what the pipeline's verify stage runs for the samples of one task (and
what ``benchmarks/sandbox_throughput.py`` times). The samples are split into at most
``parts`` parts, run on ``pool``: a verifier with ``verify_many`` (the code family) judges a
part in as few sandbox entries as its backend allows; any other verifier gets one ``verify``
per sample, as before. A sample whose first verdict is ``infra_error`` is then tried again
alone with ``verify_with_retry`` (the first try counts as one of ``policy.attempts``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol, TypeVar

from tasksieve.schemas import TaskRecord, Verdict
from tasksieve.verifiers.families.base import Verifier
from tasksieve.verifiers.retry import RetryOutcome, RetryPolicy, verify_with_retry

PART_MIN = 4  # samples per part before a task's samples are split over pool threads
T = TypeVar("T")
R = TypeVar("R")


class MapPool(Protocol):
    """What ``verify_batch`` needs of a pool (a ``ThreadPoolExecutor`` has it)."""

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> Iterator[R]: ...


def split(items: list[str], parts: int) -> list[list[str]]:
    """``items`` in at most ``parts`` contiguous parts of near-equal size, order kept."""
    parts = max(1, min(parts, len(items)))
    size, extra = divmod(len(items), parts)
    out, at = [], 0
    for p in range(parts):
        n = size + (1 if p < extra else 0)
        out.append(items[at : at + n])
        at += n
    return [p for p in out if p]


def verify_batch(
    verifier: Verifier,
    task: TaskRecord,
    solutions: list[str],
    policy: RetryPolicy,
    pool: MapPool | Any = None,
    parts: int = 1,
) -> list[RetryOutcome]:
    """Each solution's verdict with retries (see the module docstring), in order."""
    many: Callable[[TaskRecord, list[str]], list[Verdict]] | None = getattr(
        verifier, "verify_many", None
    )

    def first(part: list[str]) -> list[Verdict]:
        if many is not None:
            return many(task, part)
        return [verifier.verify(task, s) for s in part]

    chunks = split(solutions, parts)
    if pool is None or len(chunks) < 2:
        verdicts = [v for c in chunks for v in first(c)]
    else:
        verdicts = [v for vs in pool.map(first, chunks) for v in vs]

    def settle(pair: tuple[str, Verdict]) -> RetryOutcome:
        sol, v = pair
        if v.status != "infra_error" or policy.attempts < 2:
            return RetryOutcome(v, 1)
        rest = RetryPolicy(
            policy.attempts - 1, policy.base_s, policy.factor, policy.max_s, policy.jitter
        )
        again = verify_with_retry(lambda: verifier.verify(task, sol), rest)
        return RetryOutcome(again.verdict, again.attempts + 1, (v.detail[:200], *again.errors))

    pairs = list(zip(solutions, verdicts, strict=True))
    if pool is None:
        return [settle(p) for p in pairs]
    return list(pool.map(settle, pairs))
