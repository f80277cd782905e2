"""Sampling on its own thread (transforms.rollouts.ahead), on Beam's in-memory runner.

The handlers here stand in for a sampler: what is tested is where and when Beam's inference
step runs them, and what it emits; the real samplers go through the same step in the
rollouts tests and the shared curate run.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from typing import Any

import apache_beam as beam
import pytest
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options.pipeline_options import PipelineOptions

from tasksieve.transforms.rollouts import ahead
from tasksieve.transforms.rollouts.ahead import AheadDoFn, AheadRunInference, usable
from tasksieve.transforms.rollouts.guard import KeyedSampler, failed_samples
from tasksieve.transforms.runtime.beam_ml import ModelHandler
from tasksieve.transforms.runtime.common import NAMESPACE, count, counts_held
from tasksieve.transforms.samplers import SamplerConfig, SampleRequest, SamplerUnavailable, Samples

CFG = SamplerConfig(backend="replay", replay_path="stand-in.jsonl", samples=1)
# what the stand-ins share with the test (one process: the in-memory runner)
FAR_AHEAD = threading.Event()  # set by the upstream step once it reached the last tasks
WAITED: list[bool] = []  # per call of the blocking handler: whether it saw FAR_AHEAD in time
THREADS: list[str] = []
GOT: list[tuple[str, Any]] = []  # what came out of the inference step


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    FAR_AHEAD.clear()
    WAITED.clear()
    THREADS.clear()
    GOT.clear()
    yield
    ahead.AHEAD = True


class _Model:
    """What the stand-in loads (Beam keeps a weak reference to a loaded model)."""


class StandIn(ModelHandler[SampleRequest, Samples, Any]):
    """One completion per request, ``<task id>!``; raises on a batch holding task ``boom``;
    with ``block_s``, its first call waits (at most that long) for the upstream step to reach
    the last tasks."""

    def __init__(self, block_s: float = 0.0) -> None:
        super().__init__(min_batch_size=2, max_batch_size=2)
        self.block_s = block_s

    def batch_elements_kwargs(self) -> dict[str, Any]:
        return {"min_batch_size": 2, "max_batch_size": 2}

    def load_model(self) -> _Model:
        return _Model()

    def run_inference(
        self, batch: Sequence[SampleRequest], model: Any, inference_args: Any = None
    ) -> list[Samples]:
        THREADS.append(threading.current_thread().name)
        if self.block_s and not WAITED:
            WAITED.append(FAR_AHEAD.wait(self.block_s))
        if any(r.task_id == "boom" for r in batch):
            raise RuntimeError("the stand-in sampler broke on this batch")
        if any(r.task_id == "gone" for r in batch):
            raise SamplerUnavailable("the stand-in server is gone for good")
        count("stand_in.requests", len(batch))
        return [Samples(r.task_id, [f"{r.task_id}!"], "stand-in", "replay", 1) for r in batch]


def _upstream(tid: str, last: str) -> tuple[str, SampleRequest]:
    if tid == last:
        FAR_AHEAD.set()
    return tid, SampleRequest(tid, "code", f"prompt {tid}")


def _keep(kv: tuple[str, Samples]) -> None:
    key, s = kv
    GOT.append((key, s.error.splitlines()[0] if s.error else tuple(s.completions)))


def _run(ids: list[str], handler: StandIn) -> tuple[list[tuple[str, Any]], dict[str, int]]:
    """The keyed outputs (task id, completions or error) and the tasksieve counters."""
    GOT.clear()
    p = beam.Pipeline(options=PipelineOptions(["--direct_running_mode=in_memory"]))
    sampled, _failed = (
        p
        | beam.Create(ids, reshuffle=False)
        | beam.Map(_upstream, ids[-1])
        | AheadRunInference(KeyedSampler(handler, CFG)).with_exception_handling()
    )
    _ = sampled | beam.Map(_keep)
    _ = _failed.failed_inferences | beam.FlatMap(failed_samples, CFG)  # as ``Sample`` does
    result = p.run()
    result.wait_until_finish()
    counters = result.metrics().query(MetricsFilter().with_namespace(NAMESPACE))["counters"]
    totals: dict[str, int] = {}
    for c in counters:
        totals[c.key.metric.name] = totals.get(c.key.metric.name, 0) + c.committed
    return sorted(GOT), totals


def test_the_stages_before_sampling_go_on_while_a_batch_is_sampled() -> None:
    """The first batch's call waits until the upstream step has run the last task: only
    possible when the call is not on the bundle thread."""
    ids = [f"t{i}" for i in range(8)]
    got, _ = _run(ids, StandIn(block_s=30.0))
    assert WAITED == [True]
    assert got == [(t, (f"{t}!",)) for t in ids]
    assert set(THREADS) == {"tasksieve-sampler"}


def test_on_the_bundle_thread_the_same_wait_times_out() -> None:
    """The baseline: Beam's RunInference samples on the bundle thread, so the upstream step
    cannot reach the last task while the first batch waits (the check above can fail)."""
    ahead.AHEAD = False
    ids = [f"t{i}" for i in range(8)]
    got, _ = _run(ids, StandIn(block_s=1.0))
    assert WAITED == [False]
    assert got == [(t, (f"{t}!",)) for t in ids]
    assert "tasksieve-sampler" not in THREADS


def test_outputs_and_counters_are_the_same_both_ways() -> None:
    """Counters the handler increments on the sampling thread reach the run's metrics, as
    they do from the bundle thread; Beam's own inference counter too."""
    ids = [f"t{i}" for i in range(7)]  # an odd count: the last batch comes at finish_bundle
    ahead_out, ahead_counts = _run(ids, StandIn())
    ahead.AHEAD = False
    bundle_out, bundle_counts = _run(ids, StandIn())
    assert ahead_out == bundle_out
    assert ahead_counts == bundle_counts == {"stand_in.requests": 7}


def test_a_batch_that_raises_becomes_its_tasks_errors_and_no_others() -> None:
    ids = ["a", "b", "c", "boom", "e", "f"]  # batches of 2: (c, boom) fails
    got, counts = _run(ids, StandIn())
    errors = {k: v for k, v in got if isinstance(v, str)}
    assert set(errors) == {"c", "boom"}
    assert all("RuntimeError" in v or "broke" in v for v in errors.values()), errors
    assert {k for k, v in got if isinstance(v, tuple)} == {"a", "b", "e", "f"}
    assert counts["rollouts.sampler_errors"] == 2
    assert counts["stand_in.requests"] == 4


@pytest.mark.parametrize("ids", [["gone", "b"], ["a", "b", "gone", "d", "e", "f", "g"]])
def test_a_sampler_that_is_gone_stops_the_run(ids: list[str]) -> None:
    """Whether the failed batch is collected in a later ``process`` (Beam's dead letter, then
    ``failed_samples``) or at the bundle's end, the run stops with the sampler's message."""
    with pytest.raises(Exception, match="gone for good"):
        _run(ids, StandIn())


def test_the_installed_beam_takes_the_ahead_step() -> None:
    """A Beam whose inference DoFn changed would silently sample on the bundle thread again."""
    assert usable()
    p = beam.Pipeline()
    _ = (
        p
        | beam.Create([("a", SampleRequest("a", "code", "p"))])
        | AheadRunInference(KeyedSampler(StandIn(), CFG)).with_exception_handling()
    )
    fns: list[Any] = []

    class Visit(beam.pipeline.PipelineVisitor):
        def visit_transform(self, node: Any) -> None:
            fn = getattr(node.transform, "fn", None)
            fns.append(getattr(fn, "_fn", fn))

    p.visit(Visit())
    assert any(isinstance(fn, AheadDoFn) for fn in fns)


def test_counts_held_on_a_thread_are_returned_not_recorded() -> None:
    with counts_held() as held:
        count("x", 2)
        count("y")
    assert held == [("x", 2), ("y", 1)]
