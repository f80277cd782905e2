"""Retrying a request to a model server: which failures to retry, and how long to wait.

Plain functions, no client library: the openai sampler maps its exceptions onto ``Failure``
and calls ``call_with_retries``. The wait before retry ``n`` (1-based) is a "full jitter"
exponential backoff, uniform in ``[0, min(cap, base * 2**(n-1))]``, unless the server said
how long to wait (``Retry-After``), in which case that is honoured, capped by
``max_retry_after_s`` so a hostile or broken header cannot park a worker for hours.
What it does NOT do: share a budget across requests (each request has its own attempts), or
open a circuit when a server is down (every request spends its attempts).
"""

from __future__ import annotations

import email.utils
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

T = TypeVar("T")

RETRYABLE_STATUS = frozenset({408, 409, 429})
"""HTTP statuses worth a retry besides every 5xx: timeout, conflict, rate limited."""


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded attempts with exponential backoff and jitter."""

    max_attempts: int = 5
    base_s: float = 0.5
    cap_s: float = 30.0
    max_retry_after_s: float = 60.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1 (1 = no retry), got {self.max_attempts}")
        if not (self.base_s >= 0 and self.cap_s >= self.base_s):
            raise ValueError(f"need 0 <= base_s <= cap_s, got {self.base_s}, {self.cap_s}")
        if not self.max_retry_after_s >= 0:
            raise ValueError(f"max_retry_after_s must be >= 0, got {self.max_retry_after_s}")


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


def is_retryable_status(status: int) -> bool:
    """Whether an HTTP error status is worth retrying (408, 409, 429 and every 5xx)."""
    return status in RETRYABLE_STATUS or 500 <= status <= 599


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta seconds or an HTTP date).

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
        if when.tzinfo is None:  # an HTTP date is GMT; a naive one is read as such
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    if not math.isfinite(seconds):
        return None
    return max(0.0, seconds)


def backoff_delay(
    retry: int, policy: RetryPolicy, rng: random.Random, retry_after_s: float | None = None
) -> float:
    """Seconds to wait before retry number ``retry`` (1-based)."""
    if retry < 1:
        raise ValueError(f"retry is 1-based, got {retry}")
    if retry_after_s is not None:
        return min(retry_after_s, policy.max_retry_after_s)
    ceiling = min(policy.cap_s, policy.base_s * 2 ** min(retry - 1, 62))
    return rng.uniform(0.0, ceiling)


def call_with_retries(
    attempt: Callable[[], T],
    policy: RetryPolicy,
    *,
    rng: random.Random | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[T, Attempts]:
    """Call ``attempt`` until it returns, retrying ``Failure``s that are retryable.

    Returns the result and the attempts it took; raises ``RetriesExhausted`` when the last
    failure was not retryable or ``policy.max_attempts`` were spent. Other exceptions pass.
    """
    rng = rng or random.Random()
    record = Attempts()
    while True:
        record.attempts += 1
        try:
            return attempt(), record
        except Failure as failure:
            record.failures.append(failure.message)
            if not failure.retryable or record.attempts >= policy.max_attempts:
                raise RetriesExhausted(failure, record) from failure
            sleep(backoff_delay(record.attempts, policy, rng, failure.retry_after_s))
