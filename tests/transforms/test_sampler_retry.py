"""Retry policy of the server samplers: which failures are retried, how long it waits."""

from __future__ import annotations

import random

import pytest

from tasksieve.verifiers.http_retry import (
    Failure,
    HttpRetryPolicy,
    RetriesExhausted,
    call_with_retries,
    is_retryable_status,
    parse_retry_after,
)


@pytest.mark.parametrize(
    ("status", "retry"),
    [
        *[(408, True), (409, True), (429, True), (500, True), (503, True), (599, True)],
        *[(400, False), (401, False), (403, False), (404, False), (422, False), (600, False)],
    ],
)
def test_retryable_statuses(status: int, retry: bool) -> None:
    assert is_retryable_status(status) is retry


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        ("3", 3.0),
        (" 0 ", 0.0),
        ("1.5", 1.5),
        ("-4", 0.0),
        ("Thu, 01 Jan 1970 00:01:40 GMT", 90.0),  # now = 10 s after the epoch
        ("Thu, 01 Jan 1970 00:00:00 GMT", 0.0),  # in the past
        (None, None),
        ("", None),
        ("soon", None),
        ("nan", None),
        ("inf", None),
    ],
)
def test_parse_retry_after(header: str | None, seconds: float | None) -> None:
    assert parse_retry_after(header, now=10.0) == seconds


def test_backoff_grows_exponentially_up_to_the_cap() -> None:
    policy = HttpRetryPolicy(base_s=1.0, cap_s=5.0)
    rng = random.Random(0)
    for retry, ceiling in [(1, 1.0), (2, 2.0), (3, 4.0), (4, 5.0), (60, 5.0), (10**6, 5.0)]:
        delays = [policy.delay(retry, rng) for _ in range(200)]
        assert min(delays) >= 0 and max(delays) <= ceiling
        assert max(delays) > ceiling * 0.8  # jittered across the whole range


def test_retry_after_wins_over_backoff_but_is_capped() -> None:
    policy = HttpRetryPolicy(base_s=1.0, cap_s=2.0, max_retry_after_s=60.0)
    rng = random.Random(0)
    assert policy.delay(1, rng, retry_after_s=7.0) == 7.0
    assert policy.delay(1, rng, retry_after_s=10_000.0) == 60.0


@pytest.mark.parametrize("bad", [{"max_attempts": 0}, {"base_s": 3.0, "cap_s": 1.0}])
def test_policy_rejects_nonsense(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        HttpRetryPolicy(**bad)  # type: ignore[arg-type]


class Flaky:
    """Fails with the given failures in turn, then returns "ok"."""

    def __init__(self, *failures: Failure) -> None:
        self.failures = list(failures)
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        return "ok"


def test_retries_until_success_and_sleeps_as_told() -> None:
    waits: list[float] = []
    flaky = Flaky(Failure("503", True), Failure("429", True, retry_after_s=2.5))
    result, attempts = call_with_retries(flaky, HttpRetryPolicy(max_attempts=3), sleep=waits.append)
    assert result == "ok" and attempts.attempts == 3 and attempts.retries == 2
    assert attempts.failures == ["503", "429"]
    assert waits[1] == 2.5 and 0 <= waits[0] <= 0.5


def test_gives_up_after_max_attempts() -> None:
    flaky = Flaky(*[Failure("reset", True)] * 5)
    with pytest.raises(RetriesExhausted) as err:
        call_with_retries(flaky, HttpRetryPolicy(max_attempts=3), sleep=lambda s: None)
    assert flaky.calls == 3 and err.value.attempts.attempts == 3
    assert "out of attempts" in str(err.value) and "reset" in str(err.value)


def test_does_not_retry_a_client_error() -> None:
    flaky = Flaky(Failure("HTTP 400", False))
    with pytest.raises(RetriesExhausted) as err:
        call_with_retries(flaky, HttpRetryPolicy(max_attempts=5), sleep=lambda s: None)
    assert flaky.calls == 1 and "not retryable" in str(err.value)


def test_other_exceptions_are_not_swallowed() -> None:
    def broken() -> str:
        raise KeyError("bug")

    with pytest.raises(KeyError):
        call_with_retries(broken, HttpRetryPolicy(), sleep=lambda s: None)
