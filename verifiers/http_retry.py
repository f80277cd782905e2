"""The one retry policy of the project's HTTP clients (the service client, the model samplers).

Built on tenacity: ``call_with_retries`` runs one request until it returns, retrying the
``Failure``\\s marked retryable, at most ``HttpRetryPolicy.max_attempts`` times. The wait
before retry ``n`` (1-based) is ``backoff_delay``: exponential, capped, with jitter (the same
helper ``tasksieve.verifiers.retry`` uses for verifications), unless the server said how long
to wait: a ``Retry-After`` header, as delta seconds or as an HTTP date, is honoured up to
``max_retry_after_s`` (a stated maximum, 60 s by default), so a hostile or broken header
cannot park a worker for hours. Which statuses are worth a retry is the caller's choice
(``retry_status``): a model server's 408/409 are transient, the sandbox service's 409 is an
idempotency-key conflict that a retry would only repeat.

What it does NOT do: share a budget across requests (each request has its own attempts),
open a circuit when a server stays down (every request spends its attempts), or pick the
server to try (the caller does, per attempt: see ``tasksieve.verifiers.remote``).
"""

from __future__ import annotations

import email.utils
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

import tenacity

T = TypeVar("T")

MODEL_SERVER_STATUS = frozenset({408, 409, 429, *range(500, 600)})
"""Statuses of a model server worth a retry: timeout, conflict, rate limited, every 5xx."""


def backoff_delay(
    retry: int,
    base_s: float,
    cap_s: float,
    rng: random.Random,
    factor: float = 2.0,
    jitter: float = 1.0,
) -> float:
    """Seconds to wait before retry ``retry`` (1-based): ``min(cap_s, base_s * factor**(n-1))``
    shrunk by a random fraction up to ``jitter`` (1.0: "full jitter", anywhere in [0, ceiling])."""
    if retry < 1:
        raise ValueError(f"retry is 1-based, got {retry}")
    ceiling = min(cap_s, base_s * factor ** min(retry - 1, 62))
    return float(ceiling * (1.0 - jitter * rng.random()))


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header: delta seconds or an HTTP date.

    None when absent or unreadable; never negative. ``now`` is a Unix time (default: now).
    """
    if value is None:
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:  # an HTTP date is GMT; one without a zone is not one
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    if not math.isfinite(seconds):
        return None
    return max(0.0, seconds)


@dataclass(frozen=True)
class HttpRetryPolicy:
    """Bounded attempts, exponential backoff with full jitter, Retry-After up to a maximum."""

    max_attempts: int = 5
    base_s: float = 0.5
    cap_s: float = 30.0
    max_retry_after_s: float = 60.0
    retry_status: frozenset[int] = field(default=MODEL_SERVER_STATUS)

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1 (1 = no retry), got {self.max_attempts}")
        if not (0 <= self.base_s <= self.cap_s and math.isfinite(self.cap_s)):
            raise ValueError(f"need 0 <= base_s <= cap_s (finite), got {self.base_s}, {self.cap_s}")
        if not (0 <= self.max_retry_after_s < math.inf):
            raise ValueError(
                f"max_retry_after_s must be a finite number >= 0, got {self.max_retry_after_s}"
            )

    def retryable(self, status: int) -> bool:
        """Whether an HTTP error status is worth another attempt under this policy."""
        return status in self.retry_status

    def delay(self, retry: int, rng: random.Random, retry_after_s: float | None = None) -> float:
        """Seconds to wait before retry ``retry``: the server's Retry-After (capped), or backoff."""
        if retry_after_s is not None:
            return min(retry_after_s, self.max_retry_after_s)
        return backoff_delay(retry, self.base_s, self.cap_s, rng)


@dataclass
class Failure(Exception):
    """One failed attempt: whether it is worth retrying, and the server's Retry-After."""

    message: str
    retryable: bool
    retry_after_s: float | None = None

    def __str__(self) -> str:
        return self.message


@dataclass
class Attempts:
    """What happened to one request: attempts made and the failures met on the way."""

    attempts: int = 0
    failures: list[str] = field(default_factory=list)

    @property
    def retries(self) -> int:
        """Attempts after the first."""
        return max(0, self.attempts - 1)


class RetriesExhausted(Exception):
    """The request failed for good (a failure not worth retrying, or out of attempts)."""

    def __init__(self, last: Failure, attempts: Attempts) -> None:
        why = "not retryable" if not last.retryable else "out of attempts"
        super().__init__(f"{last.message} (after {attempts.attempts} attempt(s), {why})")
        self.last = last
        self.attempts = attempts


def status_failure(
    policy: HttpRetryPolicy, status: int, text: str, retry_after: str | None
) -> Failure:
    """The ``Failure`` for an HTTP error answer (retryable by ``policy``, its Retry-After)."""
    return Failure(text, policy.retryable(status), parse_retry_after(retry_after))


def call_with_retries(
    attempt: Callable[[], T],
    policy: HttpRetryPolicy,
    *,
    rng: random.Random | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[T, Attempts]:
    """Call ``attempt`` until it returns, retrying ``Failure``\\s that are retryable.

    Returns the result and the attempts it took; raises ``RetriesExhausted`` when the last
    failure was not retryable or ``policy.max_attempts`` were spent. Other exceptions pass.
    """
    rng = rng or random.Random()
    record = Attempts()

    def counted() -> T:
        record.attempts += 1
        try:
            return attempt()
        except Failure as failure:
            record.failures.append(failure.message)
            raise

    def wait(state: tenacity.RetryCallState) -> float:
        failure = state.outcome.exception() if state.outcome else None
        after = failure.retry_after_s if isinstance(failure, Failure) else None
        return policy.delay(state.attempt_number, rng, after)

    retrying = tenacity.Retrying(
        stop=tenacity.stop_after_attempt(policy.max_attempts),
        wait=wait,
        retry=tenacity.retry_if_exception(lambda e: isinstance(e, Failure) and e.retryable),
        sleep=sleep,
        reraise=True,
    )
    try:
        return retrying(counted), record
    except Failure as failure:
        raise RetriesExhausted(failure, record) from failure


def is_retryable_status(status: int) -> bool:
    """Whether a model server's error status is worth retrying (408, 409, 429, every 5xx)."""
    return status in MODEL_SERVER_STATUS
