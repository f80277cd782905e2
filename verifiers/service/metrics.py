"""Prometheus metrics of one server, in a registry of its own (several apps per process)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)


@dataclass
class Metrics:
    """The server's counters, gauges and histograms (names prefixed ``tasksieve_``)."""

    registry: CollectorRegistry
    queue_depth: Gauge
    in_flight: Gauge
    sessions_alive: Gauge
    latency: Histogram
    jobs: Counter
    verdicts: Counter
    infra_errors: Counter
    rejected: Counter


def make_metrics(
    depth: Callable[[], float], in_flight: Callable[[], float], sessions: Callable[[], float]
) -> Metrics:
    """Metrics whose gauges read ``depth``, ``in_flight`` and ``sessions`` when scraped."""
    reg = CollectorRegistry()
    queue_depth = Gauge("tasksieve_queue_depth", "Jobs waiting for a worker", registry=reg)
    queue_depth.set_function(depth)
    running = Gauge("tasksieve_in_flight", "Jobs a worker is running", registry=reg)
    running.set_function(in_flight)
    alive = Gauge("tasksieve_sessions_alive", "Sessions not yet deleted or reaped", registry=reg)
    alive.set_function(sessions)
    return Metrics(
        registry=reg,
        queue_depth=queue_depth,
        in_flight=running,
        sessions_alive=alive,
        latency=Histogram(
            "tasksieve_job_seconds",
            "Seconds from enqueue to answer, by kind of job",
            ["kind"],
            buckets=BUCKETS,
            registry=reg,
        ),
        jobs=Counter(
            "tasksieve_jobs", "Finished jobs by kind and outcome", ["kind", "outcome"], registry=reg
        ),
        verdicts=Counter("tasksieve_verdicts", "Verdicts by status", ["status"], registry=reg),
        infra_errors=Counter(
            "tasksieve_infra_errors",
            "Sandbox infrastructure errors, retried ones included",
            ["kind"],
            registry=reg,
        ),
        rejected=Counter(
            "tasksieve_rejected", "Requests refused before running", ["reason"], registry=reg
        ),
    )
