"""Sampling on a thread of its own, so the stages before it run meanwhile.

On the in-memory runner a stage is one bundle thread, and the rollouts' sampling is fused
with the stages before it (dedup, decontamination, gates, test strength): until this, the
thread sampled one batch of tasks (seconds to minutes on the CPU model, a server's reply
time on the others) and only then ran the next tasks' gates and mutants, so the model and the
sandbox waited on each other and about a core of two stayed idle (``docs/benchmarks/demo.md``).

``AheadRunInference`` is Beam's ``RunInference`` with one change: its inference ``DoFn``
(``AheadDoFn``, Beam's own with ``process`` and ``finish_bundle`` replaced) hands each batch
to one sampling thread per DoFn instance and returns at once. The bundle thread goes on with
the next elements upstream; each ``process`` call emits the batches that have finished, in
the order they were handed over, and ``finish_bundle`` waits for the rest. What stays as it
was:

- **the samples**: one thread samples the batches one after another in the order
  ``BatchElements`` made them, as the bundle thread did, so every model call sees the same
  batch and draws the same samples;
- **the model**: loaded (and reloaded) on the bundle thread, by Beam's own code;
- **counters**: a thread Beam did not start has no metrics container, so the sampling thread
  holds its ``count()`` calls (``runtime.common.counts_held``) and Beam's inference metrics,
  and the bundle thread records them when it emits the batch;
- **failures**: Beam's exception handling charges an exception to the element in
  ``process``, which is no longer the batch that failed. So the model handler must say what a
  failed batch becomes (``failed_batch(batch, exc)``: here each task's error ``Samples``, as
  the dead-letter path made them); an exception it re-raises (``SamplerUnavailable``) stops
  the run as before. A handler without ``failed_batch``, a side-input model or an inference
  timeout gets Beam's ``RunInference`` unchanged.

What it does NOT do: run two batches at once (one model call at a time per process, as
before), or overlap across bundles (``finish_bundle`` waits; the in-memory runner makes one
bundle of a stage's input up to ``chunked_runner.PART_BYTES``). It relies on Beam's private
``_RunInferenceDoFn`` (``process``, ``_run_inference``, ``_should_update_model``,
``update_model``); where the installed Beam lacks one of them, ``usable()`` is False and the
stage runs Beam's ``RunInference`` as it is.
"""

from __future__ import annotations

import collections
import importlib
import queue
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from apache_beam.transforms.window import GlobalWindows

from tasksieve.transforms.runtime import beam_ml  # loads Beam's inference API first
from tasksieve.transforms.runtime.common import count, counts_held

base: Any = importlib.import_module("apache_beam.ml.inference.base")
_NEEDED = ("process", "_run_inference", "_should_update_model", "update_model", "finish_bundle")
_SWAP = threading.Lock()


def usable() -> bool:
    """Whether the installed Beam has the inference DoFn this module was written against."""
    cls = getattr(base, "_RunInferenceDoFn", None)
    return cls is not None and all(callable(getattr(cls, name, None)) for name in _NEEDED)


@dataclass
class _Done:
    """A batch's predictions, with what the sampling thread held back for the bundle thread."""

    predictions: list[Any]
    counts: list[tuple[str, int]]
    size: int
    num_bytes: int
    latency_us: int


class _Sampler:
    """One daemon thread that runs submitted calls one at a time, in order; it ends when
    closed or after ``IDLE_S`` without work (a long-lived process builds many pipelines)."""

    IDLE_S = 30.0

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        fut: Future[Any] = Future()
        with self._lock:  # the thread decides to end under it too: no job is stranded
            self._jobs.put((fut, fn, args))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="tasksieve-sampler", daemon=True
                )
                self._thread.start()
        return fut

    def close(self) -> None:
        with self._lock:
            if self._thread is not None:
                self._jobs.put(None)
                self._thread = None

    def _run(self) -> None:
        while True:
            try:
                job = self._jobs.get(timeout=self.IDLE_S)
            except queue.Empty:
                with self._lock:
                    if self._jobs.empty():
                        self._thread = None
                        return
                continue
            if job is None:
                return
            fut, fn, args = job
            if not fut.set_running_or_notify_cancel():
                continue  # cancelled: its bundle was abandoned
            try:
                fut.set_result(fn(*args))
            except BaseException as exc:  # handed to whoever waits on it
                fut.set_exception(exc)


class AheadDoFn(base._RunInferenceDoFn):
    """Beam's inference DoFn, sampling each batch on its own thread (see the module)."""

    def setup(self) -> None:
        super().setup()
        self._sampler = _Sampler()
        self._pending: collections.deque[Future[Any]] = collections.deque()

    def start_bundle(self) -> None:
        for fut in self._pending:  # what a failed bundle left: never emitted
            fut.cancel()
        self._pending = collections.deque()

    def process(self, batch: Any, inference_args: Any, si_model_metadata: Any = None) -> Any:
        if self._should_update_model(new_side_input_path=None):
            self.update_model(side_input_model_path=None)
        self._pending.append(self._sampler.submit(self._sample, batch, inference_args))
        yield from self._ready(wait=False)

    def finish_bundle(self) -> Any:
        for prediction in self._ready(wait=True):
            yield GlobalWindows.windowed_value_at_end_of_window(prediction)
        super().finish_bundle()

    def teardown(self) -> None:
        for fut in getattr(self, "_pending", ()):
            fut.cancel()
        if hasattr(self, "_sampler"):
            self._sampler.close()
        super().teardown()

    def _sample(self, batch: Any, inference_args: Any) -> _Done:
        """On the sampling thread: the batch's predictions, or what the handler makes of its
        failure."""
        start = time.perf_counter_ns()
        with counts_held() as held:
            try:
                predictions = list(self._run_inference(batch, inference_args))
            except Exception as exc:  # the handler decides (or re-raises)
                predictions = list(self._model_handler.failed_batch(batch, exc))
        return _Done(
            predictions,
            held,
            len(batch),
            self._model_handler.get_num_bytes(batch),
            (time.perf_counter_ns() - start) // 1000,
        )

    def _ready(self, *, wait: bool) -> Iterator[Any]:
        """The predictions of the batches done (all of them when ``wait``), in order."""
        while self._pending and (wait or self._pending[0].done()):
            done: _Done = self._pending.popleft().result()  # a job's exception stops here
            for name, value in done.counts:
                count(name, value)
            if self._metrics_collector:
                self._metrics_collector.update(done.size, done.num_bytes, done.latency_us)
            yield from done.predictions


class AheadRunInference(beam_ml.RunInference):
    """Beam's ``RunInference`` with ``AheadDoFn`` as its inference step, where it applies."""

    def expand(self, pcoll: Any) -> Any:
        if not self._ahead(pcoll):
            return super().expand(pcoll)
        with _SWAP:  # the class Beam's expand instantiates, for this expansion only
            original = base._RunInferenceDoFn
            base._RunInferenceDoFn = AheadDoFn
            try:
                return super().expand(pcoll)
            finally:
                base._RunInferenceDoFn = original

    def _ahead(self, pcoll: Any) -> bool:
        if not AHEAD or not usable():
            return False
        if not callable(getattr(self._model_handler, "failed_batch", None)):
            return False
        if getattr(self, "_timeout", None) is not None:
            return False  # Beam runs a timed call on its own thread
        if getattr(self, "_model_metadata_pcoll", None) is not None:
            return False
        if getattr(self, "_watch_model_pattern", None):
            return False
        return isinstance(pcoll.windowing.windowfn, GlobalWindows)


AHEAD = True
"""False: every ``AheadRunInference`` built afterwards is Beam's ``RunInference`` (the
benchmarks' baseline, ``benchmarks/demo_overlap.py``)."""
