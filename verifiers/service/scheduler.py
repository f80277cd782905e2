"""A bounded priority queue with per-client round robin, deadlines and infra retries.

Jobs are blocking callables run on a fixed pool of worker threads (never on the event loop).
Lower priority numbers run first; within one priority, clients take turns (one job each per
turn), so a client that floods the queue cannot starve another at the same priority. A job
whose deadline passes while it waits is taken out of the queue and answered
``DeadlineExceeded`` at that moment (a watcher thread sleeps until the earliest deadline), and
never runs. A job whose caller cancelled its future is dropped. A job that reports an
infrastructure error is run again, up to ``infra_retries`` more times, after a short backoff.
``close`` answers every waiting job (``QueueFull``) even if some were cancelled meanwhile.

Not guarded against: a job that blocks forever (the sandbox's own wall limit bounds every
run); starvation of low priorities under a permanent flood of higher ones (by design).
"""

from __future__ import annotations

import random
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from tasksieve.verifiers.http_retry import backoff_delay

PRIORITIES: dict[str, int] = {"training": 0, "interactive": 1, "curation": 2, "batch": 3}


class QueueFull(Exception):
    """The queue holds ``max_queue`` jobs; ``retry_after_s`` estimates when one frees up."""

    def __init__(self, retry_after_s: float) -> None:
        super().__init__(f"queue full; retry after {retry_after_s:.0f}s")
        self.retry_after_s = retry_after_s


class DeadlineExceeded(Exception):
    """The job's deadline passed before a worker could start it; it never ran."""


# A job body returns (result, infra_error); a truthy infra_error asks for a retry.
JobBody = Callable[[], tuple[Any, str | None]]


@dataclass
class Job:
    """One queued unit of sandbox work and the future its caller awaits."""

    body: JobBody
    priority: int
    client: str
    deadline: float | None  # time.monotonic() value, or None for no deadline
    kind: str = "job"
    key: str | None = None  # the idempotency key, when the request sent one
    enqueued: float = field(default_factory=time.monotonic)
    future: Future[Any] = field(default_factory=Future)


@dataclass
class Stats:
    """Counters the metrics endpoint and Retry-After read (updated under the lock)."""

    done: int = 0
    dropped_deadline: int = 0
    infra_retries: int = 0
    busy_s: float = 0.0


Hook = Callable[[Job, str, float], None]  # (job, outcome, seconds since enqueue)


def _due(job: Job, now: float) -> bool:
    """Whether ``job``'s deadline has passed at ``now``."""
    return job.deadline is not None and job.deadline <= now


class Scheduler:
    """Runs jobs on ``workers`` threads, highest priority first, clients in turn."""

    def __init__(
        self,
        workers: int,
        max_queue: int,
        infra_retries: int = 2,
        retry_backoff_s: float = 0.05,
        on_finish: Hook | None = None,
    ) -> None:
        if workers < 1 or max_queue < 1 or infra_retries < 0:
            raise ValueError("need workers >= 1, max_queue >= 1 and infra_retries >= 0")
        self.workers = workers
        self.max_queue = max_queue
        self.infra_retries = infra_retries
        self.retry_backoff_s = retry_backoff_s
        self.on_finish = on_finish
        self.stats = Stats()
        # priority -> client -> that client's jobs; the OrderedDict order is the turn order.
        self._queues: dict[int, OrderedDict[str, deque[Job]]] = {}
        self._depth = 0
        self._in_flight = 0
        lock = threading.Lock()
        self._cond = threading.Condition(lock)  # workers wait here for jobs
        self._deadlines = threading.Condition(lock)  # the watcher waits here for deadlines
        self._stopping = False
        self._rng = random.Random()
        self._threads = [
            threading.Thread(target=self._work, name=f"sched-{i}", daemon=True)
            for i in range(workers)
        ]
        self._threads.append(threading.Thread(target=self._watch, name="sched-dl", daemon=True))
        for t in self._threads:
            t.start()

    # ------------------------------------------------------------------ public
    @property
    def depth(self) -> int:
        """Jobs waiting (not yet started)."""
        return self._depth

    @property
    def in_flight(self) -> int:
        """Jobs a worker is running now."""
        return self._in_flight

    def submit(self, job: Job) -> Future[Any]:
        """Queue ``job``; raises ``QueueFull`` when ``max_queue`` jobs already wait."""
        with self._cond:
            if self._stopping:
                raise QueueFull(1.0)
            if self._depth >= self.max_queue:
                raise QueueFull(self._retry_after())
            per_client = self._queues.setdefault(job.priority, OrderedDict())
            per_client.setdefault(job.client, deque()).append(job)
            self._depth += 1
            self._cond.notify()
            if job.deadline is not None:
                self._deadlines.notify()
        return job.future

    def close(self, timeout: float = 5.0) -> None:
        """Stop taking jobs, fail the waiting ones, and join the workers."""
        with self._cond:
            self._stopping = True
            waiting = [j for q in self._queues.values() for d in q.values() for j in d]
            self._queues.clear()
            self._depth = 0
            self._cond.notify_all()
            self._deadlines.notify_all()
        for job in waiting:
            if job.future.set_running_or_notify_cancel():  # False: its caller cancelled it
                job.future.set_exception(QueueFull(1.0))
        for t in self._threads:
            t.join(timeout)

    # ------------------------------------------------------------------ internals
    def _retry_after(self) -> float:
        """Seconds until a slot is likely free: the backlog over the workers at the mean cost."""
        mean = self.stats.busy_s / self.stats.done if self.stats.done else 1.0
        return max(1.0, min(60.0, self._depth * mean / self.workers))

    def _watch(self) -> None:
        """Answer ``DeadlineExceeded`` to each waiting job as its deadline passes."""
        while True:
            with self._cond:
                if self._stopping:
                    return
                now = time.monotonic()
                expired = self._remove(partial(_due, now=now))
                if not expired:
                    soonest = min(
                        (
                            j.deadline
                            for q in self._queues.values()
                            for d in q.values()
                            for j in d
                            if j.deadline is not None
                        ),
                        default=None,
                    )
                    self._deadlines.wait(None if soonest is None else max(0.0, soonest - now))
                    continue
                self.stats.dropped_deadline += len(expired)
            for job in expired:
                self._expire(job, now)

    def _remove(self, doomed: Callable[[Job], bool]) -> list[Job]:
        """Take the waiting jobs ``doomed`` says out of the queues (call under the lock)."""
        out: list[Job] = []
        for prio in list(self._queues):
            per_client = self._queues[prio]
            for client in list(per_client):
                jobs = per_client[client]
                kept = deque(j for j in jobs if not doomed(j))
                out += [j for j in jobs if doomed(j)]
                if kept:
                    per_client[client] = kept
                else:
                    del per_client[client]
            if not per_client:
                del self._queues[prio]
        self._depth -= len(out)
        return out

    def _expire(self, job: Job, now: float) -> None:
        if not job.future.set_running_or_notify_cancel():
            return
        self._finish(job, "deadline")
        waited = now - job.enqueued
        job.future.set_exception(DeadlineExceeded(f"deadline passed after {waited:.3f}s queued"))

    def _take(self) -> Job | None:
        """The next job: lowest priority number, then the client whose turn it is."""
        for prio in sorted(self._queues):
            per_client = self._queues[prio]
            client, jobs = next(iter(per_client.items()))
            job = jobs.popleft()
            del per_client[client]
            if jobs:  # the client goes to the back of the turn order
                per_client[client] = jobs
            if not per_client:
                del self._queues[prio]
            self._depth -= 1
            return job
        return None

    def _work(self) -> None:
        while True:
            with self._cond:
                while not self._queues and not self._stopping:
                    self._cond.wait()
                if self._stopping:
                    return
                job = self._take()
                if job is None:
                    continue
                self._in_flight += 1
            try:
                self._run(job)
            finally:
                with self._cond:
                    self._in_flight -= 1

    def _run(self, job: Job) -> None:
        now = time.monotonic()
        if job.deadline is not None and now > job.deadline:  # taken just as it expired
            with self._cond:
                self.stats.dropped_deadline += 1
            self._expire(job, now)
            return
        if not job.future.set_running_or_notify_cancel():
            return
        t0 = time.monotonic()
        try:
            result, infra = job.body()
            for attempt in range(self.infra_retries):
                if not infra:
                    break
                with self._cond:
                    self.stats.infra_retries += 1
                time.sleep(backoff_delay(attempt + 1, self.retry_backoff_s, 1.0, self._rng))
                result, infra = job.body()
        except BaseException as exc:  # a bug in a job body must still answer its caller
            self._account(t0)
            self._finish(job, "error")
            job.future.set_exception(exc)
            return
        self._account(t0)
        self._finish(job, "infra_error" if infra else "ok")  # before the answer: journals see
        job.future.set_result(result)  # every job whose answer a client may have received

    def _account(self, t0: float) -> None:
        with self._cond:
            self.stats.done += 1
            self.stats.busy_s += time.monotonic() - t0

    def _finish(self, job: Job, outcome: str) -> None:
        if self.on_finish is not None:
            self.on_finish(job, outcome, time.monotonic() - job.enqueued)
