"""Beam's Dask runner, adapted to what the curate pipeline uses (``--runner DaskRunner``).

The pipeline runs on ``apache_beam.runners.dask``'s ``DaskRunner`` with its pipeline overrides
(Create, GroupByKey, Flatten, Reshuffle) and its options (``--dask_client_address``,
``--dask_npartitions``, ``--dask_partition_size`` and the rest), against a
``dask.distributed`` scheduler. Beam 2.77's runner lacks primitives the pipeline needs; each
is replaced here, and each gap is found from the pipeline's own transforms as they are
translated, not assumed:

- tagged outputs (``with_outputs``, ``with_exception_handling``, ``Partition``): Beam's runner
  puts every output of a ParDo in one bag, so a step reading one tag reads them all. Here a
  ParDo's partitions hold ``(tag, value)`` pairs and each consumer reads the tag it names.
- ``finish_bundle`` outputs (``BatchElements``, the file sinks): lost there, kept here.
- counters: its ``metrics()`` raises; here every bundle returns its counters with its outputs,
  so they are committed values (a retried task counts once) and conservation stays exact.
- several sinks: it computes only the last translated transform; here every ParDo is
  computed in one graph (shared steps run once).
- side inputs: it iterates the side input's bag inside each task (recomputing its producers
  there); here a side input is computed once and handed to every partition.
- graph size: its ``dask.bag`` translation re-optimises the whole upstream graph at every step
  that takes a side input (minutes for this pipeline before a task ran; so did a
  ``dask.delayed`` translation, merging graphs at every call). Here each PCollection is a list
  of partitions in one plain task graph built in one pass, and partitions are kept to at most
  ``--dask_npartitions`` (default 4) at every Flatten and GroupByKey, so the graph grows with
  the pipeline's steps, not with their product.
- Reshuffle: a no-op there, so every record of one input file stays in one partition (one
  task at a time); here it deals the records round-robin over ``--dask_npartitions``
  partitions (default 4), which the workers then run side by side.
- GroupByKey: a shuffle by a hash of the pickled key, so grouping does not depend on each
  worker process's ``PYTHONHASHSEED``.

What it refuses, with the step named (``UnsupportedOnDask``): stateful DoFns and timers,
DoFns with ``process_batch``, windowing other than the global window, unbounded
PCollections, Beam source reads (``beam.io.Read``), and any other primitive it has no
translation for. Each DoFn is set up and torn down once per bundle (a partition).
"""

from __future__ import annotations

import hashlib
import math
import pickle
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import apache_beam as beam
from apache_beam import pvalue
from apache_beam.metrics.execution import MetricKey, MetricResult
from apache_beam.metrics.metric import MetricResults, MetricsFilter
from apache_beam.metrics.metricbase import MetricName
from apache_beam.pipeline import AppliedPTransform, PipelineVisitor
from apache_beam.runners.common import DoFnSignature
from apache_beam.runners.dask.dask_runner import DaskOptions
from apache_beam.runners.dask.dask_runner import DaskRunner as BeamDaskRunner
from apache_beam.runners.dask.overrides import (
    _Create,
    _Flatten,
    _GroupAlsoByWindow,
    _GroupByKeyOnly,
    _Reshuffle,
    dask_overrides,
)
from apache_beam.runners.runner import PipelineResult, PipelineState
from apache_beam.transforms.window import GlobalWindows
from apache_beam.utils.windowed_value import WindowedValue

from tasksieve.pipeline.curate.dask_bundle import (
    COUNTERS,
    ParDoSpec,
    SideSpec,
    pickled,
    run_bundle,
)

PARTITION_SIZE = 128
"""Elements per partition of a Create when neither Dask partition option is given."""
PARTITIONS = 4
"""Most partitions of a Flatten or GroupByKey output without ``--dask_npartitions``."""
KEY = "tasksieve-dask"


class UnsupportedOnDask(ValueError):
    """The pipeline uses a primitive the Dask path does not run."""


@dataclass
class _Parts:
    """A translated transform: its partitions, and whether items are ``(tag, value)`` pairs."""

    parts: list[Any]
    tagged: bool


def _stable_hash(key: Any) -> int:
    return int.from_bytes(hashlib.blake2b(pickle.dumps(key, 4), digest_size=8).digest(), "big")


def _pick(part: list[tuple[Any, Any]], tag: str | None) -> list[Any]:
    return [value for t, value in part if t == tag]


def _counters(part: list[tuple[Any, Any]]) -> list[Any]:
    return [value for t, value in part if t == COUNTERS]


def _split(part: list[tuple[Any, Any]], n: int) -> list[list[tuple[Any, Any]]]:
    """One partition's ``(key, windowed value)`` pairs in ``n`` buckets by key hash."""
    buckets: list[list[tuple[Any, Any]]] = [[] for _ in range(n)]
    for kv in part:
        buckets[_stable_hash(kv[0]) % n].append(kv)
    return buckets


def _group(j: int, *splits: list[list[tuple[Any, Any]]]) -> list[tuple[Any, list[Any]]]:
    """Bucket ``j`` of every split, grouped by key; values lose the window ReifyWindows put on
    them (the global window, the only one run here)."""
    groups: dict[bytes, tuple[Any, list[Any]]] = {}
    for buckets in splits:
        for key, wv in buckets[j]:
            value = wv.value if isinstance(wv, WindowedValue) else wv
            groups.setdefault(pickle.dumps(key, 4), (key, []))[1].append(value)
    return list(groups.values())


def _deal(part: list[Any], n: int) -> list[list[Any]]:
    """One partition's items dealt round-robin into ``n`` piles."""
    return [part[i::n] for i in range(n)]


def _take(j: int, *dealt: list[list[Any]]) -> list[Any]:
    return [x for piles in dealt for x in piles[j]]


def _concat(*parts: list[Any]) -> list[Any]:
    return [x for p in parts for x in p]


def _chunks(values: Sequence[Any], npartitions: int | None, size: int | None) -> list[list[Any]]:
    if npartitions and size:
        raise ValueError("give --dask_npartitions or --dask_partition_size, not both")
    if npartitions:
        size = max(1, math.ceil(len(values) / npartitions))
    size = size or PARTITION_SIZE
    return [list(values[i : i + size]) for i in range(0, len(values), size)] or [[]]


def _refuse(node: AppliedPTransform, what: str) -> UnsupportedOnDask:
    return UnsupportedOnDask(f"--runner DaskRunner: step {node.full_label!r} {what}")


class _Translate(PipelineVisitor):
    """Every leaf transform to partitions (keys of one task graph); the ParDos' counters are
    what is computed."""

    def __init__(self, bag_kwargs: dict[str, Any]) -> None:
        self.bag_kwargs = bag_kwargs
        self.most = bag_kwargs.get("npartitions") or PARTITIONS
        self.dsk: dict[tuple[str, int], Any] = {}
        self.made: dict[AppliedPTransform, _Parts] = {}
        self.counters: list[tuple[str, int]] = []
        self.whole: dict[int, tuple[str, int]] = {}

    def task(self, *task: Any) -> tuple[str, int]:
        """Add ``(func, *args)`` (args may be keys or lists of keys) or a value; its key."""
        key = (KEY, len(self.dsk))
        self.dsk[key] = task if len(task) > 1 else task[0]
        return key

    def fewer(self, parts: list[Any]) -> list[Any]:
        """At most ``self.most`` partitions: neighbours concatenated."""
        if len(parts) <= self.most:
            return parts
        size = math.ceil(len(parts) / self.most)
        return [self.task(_concat, *parts[i : i + size]) for i in range(0, len(parts), size)]

    def view(self, pcoll: pvalue.PCollection) -> list[Any]:
        """The partitions of one PCollection: the producer's, or their items of one tag."""
        producer: Any = pcoll.producer
        made = self.made[producer]
        if not made.tagged:
            return made.parts
        tag = next(t for t, pc in producer.outputs.items() if pc is pcoll)
        return [self.task(_pick, p, tag) for p in made.parts]

    def whole_of(self, pcoll: pvalue.PCollection) -> tuple[str, int]:
        """A side input's PCollection as one list, computed once however many steps read it."""
        if id(pcoll) not in self.whole:
            self.whole[id(pcoll)] = self.task(_concat, *self.view(pcoll))
        return self.whole[id(pcoll)]

    def visit_transform(self, node: AppliedPTransform) -> None:
        for out in node.outputs.values():
            if isinstance(out, pvalue.PCollection) and not out.is_bounded:
                raise _refuse(node, "makes an unbounded PCollection (batch only)")
        t = node.transform
        inputs = [self.view(p) for p in node.inputs if isinstance(p, pvalue.PCollection)]
        if isinstance(t, _Create):
            npart, size = self.bag_kwargs.get("npartitions"), self.bag_kwargs.get("partition_size")
            chunks = _chunks(list(t.values), npart, size)
            made = _Parts([self.task(_concat, self.task(c)) for c in chunks], False)
        elif isinstance(t, _Flatten):
            made = _Parts(self.fewer([p for parts in inputs for p in parts]), False)
        elif isinstance(t, _Reshuffle):  # dealt round-robin over the most partitions
            n = self.most
            dealt = [self.task(_deal, p, n) for p in inputs[0]]
            made = _Parts([self.task(_take, j, *dealt) for j in range(n)], False)
        elif isinstance(t, _GroupAlsoByWindow):  # the GroupByKey's output is grouped already
            made = _Parts(inputs[0], False)
        elif isinstance(t, _GroupByKeyOnly):
            n = max(1, min(len(inputs[0]), self.most))
            splits = [self.task(_split, p, n) for p in inputs[0]]
            made = _Parts([self.task(_group, j, *splits) for j in range(n)], False)
        elif isinstance(t, beam.WindowInto):
            if not isinstance(t.get_windowing(None).windowfn, GlobalWindows):
                raise _refuse(node, "windows into other than the global window")
            made = _Parts(inputs[0], False)
        elif type(t) is beam.ParDo:
            made = self.pardo(node, inputs[0])
        else:
            what = type(t).__name__
            raise _refuse(node, f"is a {what}, a primitive the Dask path has no translation for")
        self.made[node] = made

    def pardo(self, node: AppliedPTransform, main: list[Any]) -> _Parts:
        t: Any = node.transform
        sig = DoFnSignature(t.fn)
        if sig.is_stateful_dofn() or sig.has_timers():
            raise _refuse(node, "uses state or timers, which the Dask path does not run")
        if t.fn._process_batch_defined:
            raise _refuse(node, "defines process_batch, which the Dask path does not run")
        for pc in node.main_inputs.values():
            windowing: Any = getattr(pc, "windowing", None)
            if windowing is not None and not isinstance(windowing.windowfn, GlobalWindows):
                raise _refuse(node, "reads a PCollection windowed other than globally")
        sides = tuple(SideSpec(type(si), si._view_options()) for si in node.side_inputs)
        whole = [self.whole_of(si.pvalue) for si in node.side_inputs]
        # args hold a placeholder per side input, in the order of node.side_inputs
        spec = self.task(ParDoSpec(node.full_label, pickled((t.fn, t.args, t.kwargs)), sides))
        parts = [self.task(run_bundle, p, spec, *whole) for p in main]
        self.counters += [self.task(_counters, p) for p in parts]
        return _Parts(parts, True)


class _Counters(MetricResults):
    """The run's counters, summed per step, as committed (and attempted) values."""

    def __init__(self, values: dict[MetricKey, int]) -> None:
        self.values = values

    def query(self, filter: MetricsFilter | None = None) -> dict[str, list[MetricResult]]:
        counters = [
            MetricResult(k, v, v) for k, v in self.values.items() if self.matches(filter, k)
        ]
        return {
            self.COUNTERS: counters,
            self.DISTRIBUTIONS: [],
            self.GAUGES: [],
            self.STRINGSETS: [],
            self.BOUNDED_TRIES: [],
        }


@dataclass
class DaskResult(PipelineResult):
    """The running job: its future, and the counters once it finished."""

    client: Any
    futures: list[Any]
    counters: dict[MetricKey, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__init__(PipelineState.RUNNING)

    def wait_until_finish(self, duration: int | None = None) -> str:
        timeout = None if duration is None else duration / 1000
        try:
            per_bundle = (
                self.client.gather(self.futures)
                if timeout is None
                else [f.result(timeout=timeout) for f in self.futures]
            )
        except BaseException:
            self._state = PipelineState.FAILED
            raise
        finally:
            self.client.close()
        for counted in per_bundle:  # one list per bundle of every ParDo
            for step, namespace, name, value in (c for one in counted for c in one):
                key = MetricKey(step, MetricName(namespace, name))
                self.counters[key] = self.counters.get(key, 0) + value
        self._state = PipelineState.DONE
        return str(self._state)

    def cancel(self) -> str:
        self.client.cancel(self.futures)
        self.client.close()
        self._state = PipelineState.CANCELLED
        return str(self._state)

    def metrics(self) -> _Counters:
        return _Counters(self.counters)


class DaskRunner(BeamDaskRunner):
    """Beam's ``DaskRunner`` with the translation described in this module."""

    def run_pipeline(self, pipeline: beam.Pipeline, options: Any) -> DaskResult:
        import dask.distributed as ddist

        dask_options = options.view_as(DaskOptions).get_all_options(
            drop_default=True, current_only=True
        )
        bag_kwargs = DaskOptions._extract_bag_kwargs(dask_options)
        pipeline.replace_all(dask_overrides())
        visitor = _Translate(bag_kwargs)
        pipeline.visit(visitor)  # refuses what it cannot run before anything is submitted
        client = ddist.Client(**dask_options)
        # every ParDo's counters, so every ParDo runs; shared steps run once
        futures = client.get(visitor.dsk, visitor.counters, sync=False)
        return DaskResult(client, list(futures))
