"""One bundle of a ParDo on a Dask worker: tagged outputs, side inputs and counters kept.

Beam's own Dask runner (``apache_beam.runners.dask``, Beam 2.77) runs a ParDo over one Dask
bag partition, but it drops three things the curate pipeline relies on: the tag of an output
(every tagged output lands in the same bag as the main output, so a step reading
``out["rejected"]`` also reads the kept records), what ``finish_bundle`` emits (read before it
runs), and counters (its result's ``metrics()`` raises). ``run_bundle`` here runs the DoFn the
way Beam's bundle-based DirectRunner does and returns, for one partition:

- ``(tag, value)`` for every output, ``tag`` None for the main output, values without their
  window (only the global window is run on this path: ``dask_runner`` refuses others);
- one ``(COUNTERS, [(step, namespace, name, value), ...])`` item with the bundle's counters.

Counters come from a task's result, so a task that Dask retries counts once: they are
committed values. Side inputs arrive materialised (a whole Dask ``Item`` computed once and
broadcast to the partitions) rather than recomputed inside each task.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from apache_beam.internal import pickler
from apache_beam.metrics.execution import MetricsContainer
from apache_beam.runners.common import (
    DoFnContext,
    DoFnInvoker,
    DoFnSignature,
    Receiver,
    _OutputHandler,
)
from apache_beam.runners.worker import statesampler
from apache_beam.transforms.core import DoFn
from apache_beam.transforms.sideinputs import SideInputMap
from apache_beam.transforms.window import GlobalWindow, GlobalWindows
from apache_beam.utils.counters import CounterFactory
from apache_beam.utils.windowed_value import WindowedValue

# Imported before this module unpickles a bundle's DoFns: a Dask worker then loads Beam's
# inference API (RunInference's DoFn) without its model manager's torch.
from tasksieve.transforms.runtime import beam_ml  # noqa: F401

COUNTERS = "__tasksieve_dask_counters__"
"""The tag of the one counters item each bundle appends to its outputs."""


@dataclass(frozen=True)
class SideSpec:
    """How to rebuild one side input's view on the worker."""

    view_class: Any
    view_options: dict[str, Any]


@dataclass(frozen=True)
class ParDoSpec:
    """What a worker needs to run one ParDo: its label, the DoFn with its arguments pickled as
    Beam pickles them (``(fn, args, kwargs)``), and its side inputs' views."""

    label: str
    fn: bytes
    sides: tuple[SideSpec, ...]


class _Collect(Receiver):
    """Appends ``(tag, value)`` for every windowed value it receives."""

    def __init__(self, tag: str | None, out: list[tuple[str | None, Any]]) -> None:
        self.tag = tag
        self.out = out

    def receive(self, windowed_value: WindowedValue) -> None:
        self.out.append((self.tag, windowed_value.value))


class _Receivers(dict[str | None, _Collect]):
    """Tag -> receiver, made on first use (a DoFn may emit tags nobody declared up front)."""

    def __init__(self) -> None:
        super().__init__()
        self.out: list[tuple[str | None, Any]] = []

    def __missing__(self, tag: str | None) -> _Collect:
        self[tag] = _Collect(tag, self.out)
        return self[tag]


def _global(value: Any) -> WindowedValue:
    return WindowedValue(value, 0, (GlobalWindow(),))


def run_bundle(items: Iterable[Any], spec: ParDoSpec, *side_values: list[Any]) -> list[Any]:
    """Run ``spec``'s DoFn over one partition; outputs and counters as the module says."""
    receivers = _Receivers()
    handler = _OutputHandler(
        window_fn=GlobalWindows(),
        main_receivers=receivers[None],
        tagged_receivers=receivers,
        per_element_output_counter=None,
        output_batch_converter=None,
        process_yields_batches=False,
        process_batch_yields_elements=False,
    )
    sides = [
        SideInputMap(s.view_class, s.view_options, [_global(v) for v in values])
        for s, values in zip(spec.sides, side_values, strict=True)
    ]
    fn, args, kwargs = pickler.loads(spec.fn)
    invoker = DoFnInvoker.create_invoker(
        DoFnSignature(fn),
        handler,
        context=DoFnContext(spec.label, state=None),
        side_inputs=sides,
        input_args=list(args),
        input_kwargs=dict(kwargs),
        user_state_context=None,
        bundle_finalizer_param=DoFn.BundleFinalizerParam(),
    )
    container = MetricsContainer(spec.label)
    sampler = statesampler.StateSampler("", CounterFactory())
    statesampler.set_current_tracker(sampler)
    try:
        with sampler.scoped_state(spec.label, "process", metrics_container=container):
            invoker.invoke_setup()
            invoker.invoke_start_bundle()
            for item in items:
                invoker.invoke_process(item if isinstance(item, WindowedValue) else _global(item))
            invoker.invoke_finish_bundle()
            invoker.invoke_teardown()
    finally:
        statesampler.set_current_tracker(None)
    counted = [
        (spec.label, key.metric.namespace, key.metric.name, int(value))
        for key, value in container.get_cumulative().counters.items()
    ]
    return [*receivers.out, (COUNTERS, counted)]


def pickled(obj: Any) -> bytes:
    """``obj`` as Beam pickles DoFns for workers."""
    data: bytes = pickler.dumps(obj)
    return data
