"""Small Beam helpers shared by the stages: counters and the rejected tag.

Every count also goes to the live progress channel (``transforms.runtime.progress``), and every
rejection once more as ``rejected@<stage>``, so a display can tell how far each stage is.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from typing import Any

import apache_beam as beam
from apache_beam import pvalue
from apache_beam.metrics import Metrics

from tasksieve.transforms.runtime import progress

NAMESPACE = "tasksieve"
SANDBOX_NAMESPACE = "tasksieve.sandbox"  # one counter per distinct sandbox describe() JSON
REJECTED = "rejected"


_COUNTERS: dict[str, Any] = {}
"""Beam counter objects by name: each finds the current step's metrics container when it is
incremented, so one object serves every step and thread (making one per call cost more than
the increment)."""


_HELD = threading.local()


def count(name: str, value: int = 1) -> None:
    """Increment the Beam counter ``tasksieve:<name>`` (read back into the manifest); on a
    thread inside ``counts_held``, add it to that thread's list instead."""
    held = getattr(_HELD, "counts", None)
    if held is not None:
        held.append((name, value))
        return
    counter = _COUNTERS.get(name)
    if counter is None:
        counter = _COUNTERS.setdefault(name, Metrics.counter(NAMESPACE, name))
    counter.inc(value)
    progress.report(name, value)  # live progress, when a channel is configured


@contextlib.contextmanager
def counts_held() -> Iterator[list[tuple[str, int]]]:
    """Hold this thread's ``count()`` calls in the list yielded, for a bundle thread to count.

    Beam records a counter through the bundle thread's state sampler; a thread Beam did not
    start (a stage's own worker thread) has none, and its increments would be dropped.
    """
    held: list[tuple[str, int]] = []
    _HELD.counts = held
    try:
        yield held
    finally:
        _HELD.counts = None


class _UseChannelFn(beam.DoFn):
    """Pass elements on; on set-up, name the progress channel for this worker's process."""

    def __init__(self, directory: str) -> None:
        self.directory = directory

    def setup(self) -> None:
        progress.use(self.directory)

    def teardown(self) -> None:
        progress.flush()  # what this worker has pending, before a pool may end it
        if progress.channel() == self.directory:
            progress.use(None)

    def process(self, element: Any) -> Iterator[Any]:
        yield element


def use_progress_channel(pcoll: beam.PCollection, directory: str | None) -> beam.PCollection:
    """``pcoll`` unchanged; with a ``directory``, through a step that names the channel to the
    worker processes that run it (see ``transforms.runtime.progress.use``)."""
    if not directory:
        return pcoll
    return pcoll | "ProgressChannel" >> beam.ParDo(_UseChannelFn(directory))


def count_sandbox(described: dict[str, Any]) -> None:
    """Count one worker using a sandbox that describes itself as ``described``."""
    Metrics.counter(SANDBOX_NAMESPACE, json.dumps(described, sort_keys=True)).inc()


def rejected(row: dict[str, Any]) -> pvalue.TaggedOutput:
    """Tag a rejection row for the stage's ``rejected`` output and count its reason."""
    count(f"rejected.{row['reason']}")
    progress.report(f"rejected@{row['stage']}")
    return pvalue.TaggedOutput(REJECTED, row)


def flatten_rejected(*pcolls: beam.PCollection) -> beam.PCollection:
    return tuple(pcolls) | beam.Flatten()
