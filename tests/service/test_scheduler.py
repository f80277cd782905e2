"""The scheduler on real threads: priorities, per-client turns, deadlines, retries, 429."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tasksieve.verifiers.service.idempotency import IdempotencyStore, KeyConflict
from tasksieve.verifiers.service.scheduler import (
    PRIORITIES,
    DeadlineExceeded,
    Job,
    QueueFull,
    Scheduler,
)


@pytest.fixture
def one_worker() -> Iterator[Scheduler]:
    sched = Scheduler(workers=1, max_queue=16, infra_retries=2, retry_backoff_s=0.0)
    yield sched
    sched.close()


def blocker(sched: Scheduler) -> threading.Event:
    """Occupy the only worker until the returned event is set."""
    release, started = threading.Event(), threading.Event()

    def body() -> tuple[Any, str | None]:
        started.set()
        release.wait(10)
        return None, None

    sched.submit(Job(body, 0, "blocker", None))
    assert started.wait(10)
    return release


def recorder(order: list[str], name: str) -> Callable[[], tuple[Any, str | None]]:
    def body() -> tuple[Any, str | None]:
        order.append(name)
        return name, None

    return body


def test_training_runs_before_curation(one_worker: Scheduler) -> None:
    release, order = blocker(one_worker), []
    futures = [
        one_worker.submit(Job(recorder(order, "curation"), PRIORITIES["curation"], "a", None)),
        one_worker.submit(Job(recorder(order, "training"), PRIORITIES["training"], "b", None)),
    ]
    release.set()
    for f in futures:
        f.result(10)
    assert order == ["training", "curation"]


def test_clients_take_turns_within_a_priority(one_worker: Scheduler) -> None:
    release, order = blocker(one_worker), []
    futures = [one_worker.submit(Job(recorder(order, f"a{i}"), 2, "a", None)) for i in range(3)]
    futures += [one_worker.submit(Job(recorder(order, f"b{i}"), 2, "b", None)) for i in range(2)]
    release.set()
    for f in futures:
        f.result(10)
    assert order == ["a0", "b0", "a1", "b1", "a2"]


def test_a_job_past_its_deadline_never_runs(one_worker: Scheduler) -> None:
    release, order = blocker(one_worker), []
    late = one_worker.submit(Job(recorder(order, "late"), 0, "a", time.monotonic() + 0.05))
    time.sleep(0.2)
    release.set()
    with pytest.raises(DeadlineExceeded):
        late.result(10)
    assert order == [] and one_worker.stats.dropped_deadline == 1


def test_full_queue_refuses_with_a_retry_after() -> None:
    sched = Scheduler(workers=1, max_queue=2)
    try:
        release = blocker(sched)
        for _ in range(2):
            sched.submit(Job(lambda: (None, None), 0, "a", None))
        with pytest.raises(QueueFull) as info:
            sched.submit(Job(lambda: (None, None), 0, "a", None))
        assert info.value.retry_after_s >= 1
        release.set()
    finally:
        sched.close()


@pytest.mark.parametrize("failures,calls", [(0, 1), (1, 2), (9, 3)])
def test_infra_errors_are_retried_a_bounded_number_of_times(
    one_worker: Scheduler, failures: int, calls: int
) -> None:
    made: list[int] = []

    def body() -> tuple[Any, str | None]:
        made.append(1)
        return len(made), "broke" if len(made) <= failures else None

    assert one_worker.submit(Job(body, 0, "a", None)).result(10) == calls
    assert len(made) == calls  # 1 run + at most infra_retries (2) more
    assert one_worker.stats.infra_retries == calls - 1


def test_idempotency_store_shares_the_first_future_and_refuses_other_bodies() -> None:
    store = IdempotencyStore(ttl_s=60, max_entries=2)
    first, is_first = store.claim("k", "body-1")
    again, is_again = store.claim("k", "body-1")
    assert is_first and not is_again and again is first
    with pytest.raises(KeyConflict):
        store.claim("k", "body-2")
    store.claim("k2", "x")
    store.claim("k3", "x")
    assert len(store) == 2  # bounded: the oldest key went
    _, fresh = store.claim("k", "body-1")
    assert fresh


def test_idempotency_keys_expire() -> None:
    store = IdempotencyStore(ttl_s=0.05)
    store.claim("k", "b")
    time.sleep(0.1)
    assert store.claim("k", "b")[1] is True


def test_a_deadline_passes_while_the_job_waits_not_when_a_worker_frees(
    one_worker: Scheduler,
) -> None:
    release = blocker(one_worker)  # the only worker stays busy throughout
    late = one_worker.submit(Job(lambda: (None, None), 0, "a", time.monotonic() + 0.1))
    try:
        with pytest.raises(DeadlineExceeded):
            late.result(5)
        assert one_worker.depth == 0  # it left the queue
    finally:
        release.set()


def test_close_answers_every_waiting_job_although_one_was_cancelled() -> None:
    sched = Scheduler(workers=1, max_queue=8)
    release = blocker(sched)
    waiting = [sched.submit(Job(lambda: (None, None), 0, c, None)) for c in "abc"]
    assert waiting[1].cancel()  # its caller went away
    threading.Timer(0.2, release.set).start()
    sched.close()
    for future in (waiting[0], waiting[2]):
        with pytest.raises(QueueFull):
            future.result(1)


@pytest.mark.parametrize("mode", ["packed", "live"])
def test_service_close_deletes_sessions_although_a_waiting_job_was_cancelled(mode: str) -> None:
    from tasksieve.verifiers.service.config import ServiceConfig
    from tasksieve.verifiers.service.core import Service

    service = Service(ServiceConfig(insecure_no_auth=True, workers=1, session_mode=mode))
    release = blocker(service.scheduler)
    waiting = [service.scheduler.submit(Job(lambda: (None, None), 0, c, None)) for c in "ab"]
    waiting[0].cancel()  # its client disconnected
    session = service.sessions.create(_limits(), 60)
    threading.Timer(0.2, release.set).start()
    service.close()
    if mode == "packed":
        assert not session.root.exists() and not session.root.parent.exists()
    else:  # its workspace closed: every process in it killed, its layer gone
        assert session.closed and not session.ws.alive
    with pytest.raises(QueueFull):
        waiting[1].result(1)


def _limits() -> Any:
    from tasksieve.verifiers.sandbox.base import Limits

    return Limits(wall_s=5, cpu_s=5, memory_mb=256)
