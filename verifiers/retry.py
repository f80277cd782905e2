"""Bounded retries, with exponential backoff and jitter, for verifications that hit infra errors.

An ``infra_error`` verdict says the environment broke (a worker that did not start, a sandbox
that could not run), never that the solution is wrong, so it is worth another try; every other
status is final. ``verify_with_retry`` calls a verification up to ``RetryPolicy.attempts``
times, sleeping ``min(max_s, base_s * factor ** (i - 1))`` after failed attempt ``i``, shrunk by
a random fraction up to ``jitter`` (so workers that failed together do not retry together);
the delay is ``tasksieve.verifiers.http_retry.backoff_delay``, the HTTP clients' own helper.
The worst-case added wait is the sum of those delays (about 3.5 s with the defaults).

It does NOT guard against: a verification that hangs instead of failing (each verifier bounds
its own wall clock), or an environment that stays broken for longer than the backoff (the
verdict then stays ``infra_error`` and the caller decides; see ``transforms.algorithms.settle``).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from tasksieve.schemas import Verdict
from tasksieve.verifiers.http_retry import backoff_delay


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently an ``infra_error`` verification is tried again.

    ``attempts`` counts the first try (1 = never retry); delays are in seconds.
    """

    attempts: int = 3
    base_s: float = 0.5
    factor: float = 2.0
    max_s: float = 8.0
    jitter: float = 0.5

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError(f"need attempts >= 1 (1 = no retry), got {self.attempts}")
        if self.base_s < 0 or self.max_s < self.base_s:
            raise ValueError(f"need 0 <= base_s <= max_s, got {self.base_s}, {self.max_s}")
        if self.factor < 1:
            raise ValueError(f"need factor >= 1 (delays must not shrink), got {self.factor}")
        if not 0 <= self.jitter <= 1:
            raise ValueError(f"need 0 <= jitter <= 1 (a fraction of the delay), got {self.jitter}")

    def delay(self, attempt: int, rng: random.Random) -> float:
        """Seconds to wait after failed attempt ``attempt`` (1-based)."""
        return backoff_delay(attempt, self.base_s, self.max_s, rng, self.factor, self.jitter)


@dataclass(frozen=True)
class RetryOutcome:
    """The last verdict, how many attempts it took, and the infra errors met on the way."""

    verdict: Verdict
    attempts: int
    errors: tuple[str, ...] = field(default_factory=tuple)

    @property
    def retries(self) -> int:
        """Attempts beyond the first."""
        return self.attempts - 1

    @property
    def recovered(self) -> bool:
        """Whether a retry turned an infra error into a real verdict."""
        return self.attempts > 1 and self.verdict.status != "infra_error"

    @property
    def exhausted(self) -> bool:
        """Whether every attempt hit an infra error."""
        return self.verdict.status == "infra_error"


def verify_with_retry(
    verify: Callable[[], Verdict],
    policy: RetryPolicy,
    sleep: Callable[[float], None] = time.sleep,
    rng: random.Random | None = None,
) -> RetryOutcome:
    """Call ``verify`` until it gives a verdict other than ``infra_error``, at most
    ``policy.attempts`` times, backing off between attempts."""
    rng = rng or random.Random()
    errors: list[str] = []
    attempt = 1
    while True:
        verdict = verify()
        if verdict.status != "infra_error":
            return RetryOutcome(verdict, attempt, tuple(errors))
        errors.append(verdict.detail[:200])
        if attempt >= policy.attempts:
            return RetryOutcome(verdict, attempt, tuple(errors))
        sleep(policy.delay(attempt, rng))
        attempt += 1
