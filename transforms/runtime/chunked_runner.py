"""Beam's in-memory runner, made to hand each stage its input in chunks rather than whole.

Beam's ``FnApiRunner`` (the DirectRunner's batch engine) sends a stage's whole input to the
worker as ONE data message (``BundleManager._send_input_to_worker`` writes every buffered chunk
into one stream and sends it on close, Beam 2.78), and builds the output of a GroupByKey as ONE
encoded stream per worker (``GroupingBuffer.partition``). While a stage starts, its whole input
therefore exists several times over: the buffered chunks or decoded groups, the growing output
stream (its buffer doubled on each resize), the ``bytes`` copy of it, the message, and the
worker's copy of the message's data; and the in-memory data channel keeps every queued message
until the whole queue has been read (``InMemoryDataChannel.input_elements``). At 100,000 tasks
one such input is about 300 MB, and past 2 GB one message would exceed protobuf's limit for a
serialised message (not tried here).

The in-process worker also runs a whole bundle before the runner reads any of its output
(``EmbeddedWorkerHandler.push`` is a plain call), and a stage is one bundle: its whole output
waits in the data channel while the runner copies it out, on top of its whole input.

``install()`` replaces four methods:

- ``send_in_chunks``: the same chunks written in the same order, the stream flushed after each
  whole chunk once it holds the data channel's flush size (10 MB), as the worker already does
  for its own outputs. A chunk holds whole elements (a worker's output message or whole
  groups), so every message does.
- ``chunked_partition``: the same groups, in the same order and assignment to workers,
  encoded into chunks of about ``CHUNK_BYTES``, each table entry dropped once it is encoded.
- ``input_elements_released``: the same messages yielded in the same order, each dropped from
  the queue once handed on.
- ``process_in_parts`` (``BundleManager.process_bundle``): a stage input of more than
  ``PART_BYTES`` runs as bundles of about that size, one after another, each one's chunks
  freed once it ran; only one bundle's output waits in the channel at a time, and the input
  shrinks as the output grows. Counters are summed over the bundles. A file sink writes one
  shard per bundle, so a large run has more, smaller shards holding the same rows.

What reaches the stage is the same elements in the same order: the bytes of the chunks,
joined, equal the stream Beam would have built (``tests/transforms/test_chunked_runner.py``).
Each method is replaced only where it is the one this module was written against (checked by
qualified name and parameters); another Beam keeps its own, and ``install()`` says so.
"""

from __future__ import annotations

import importlib
import inspect
import itertools
import logging
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from apache_beam.coders.coder_impl import create_OutputStream
from apache_beam.metrics import monitoring_infos
from apache_beam.portability.api import beam_fn_api_pb2
from apache_beam.runners.portability.fn_api_runner import execution, worker_handlers
from apache_beam.transforms import trigger
from apache_beam.transforms.window import GlobalWindow, GlobalWindows
from apache_beam.utils import windowed_value

log = logging.getLogger("tasksieve")

CHUNK_BYTES = 8 << 20
"""A chunk is cut once it holds at least this many bytes (whole groups only)."""

_ORIGINAL: dict[tuple[str, str], Any] = {}  # (class, method) -> Beam's own, while replaced
_WARNED: set[str] = set()
_RELEASED = "_tasksieve_released"  # set on a group buffer whose stage ran in parts


def _grouped(buf: Any) -> Callable[[Any, list[Any]], Iterable[Any]]:
    """How one key's values become the windowed (key, values) of the group's output."""
    if not buf._windowing.is_default():
        driver = trigger.create_trigger_driver(buf._windowing, True, clock=buf._clock)
        return driver.process_entire_key
    pane = windowed_value.PaneInfo(
        is_first=True,
        is_last=True,
        timing=windowed_value.PaneInfoTiming.ON_TIME,
        index=0,
        nonspeculative_index=0,
    )
    at_end = GlobalWindows.windowed_value(
        None, timestamp=GlobalWindow().max_timestamp(), pane_info=pane
    )
    return lambda key, values: (at_end.with_value((key, values)),)


def chunked_partition(buf: Any, n: int) -> list[list[bytes]]:
    """``GroupingBuffer.partition`` in chunks: group ``i`` goes to worker ``i % n`` as before,
    its encoding appended to that worker's current chunk; a chunk of ``CHUNK_BYTES`` or more is
    closed and a new one begun. Every worker gets at least one (maybe empty) chunk."""
    if getattr(buf, _RELEASED, False):
        raise RuntimeError("a group buffer was read again after a stage ran in parts from it")
    if buf._grouped_output:
        return buf._grouped_output
    out_coder = buf._post_grouped_coder.get_impl()
    key_coder = buf._key_coder.get_impl()
    windowed = _grouped(buf)
    chunks: list[list[bytes]] = [[] for _ in range(n)]
    streams = [create_OutputStream() for _ in range(n)]
    table = buf._table
    for idx, encoded_key in enumerate(list(table)):
        values = table.pop(encoded_key)  # freed as soon as encoded
        stream = streams[idx % n]
        for group in windowed(key_coder.decode(encoded_key), values):
            out_coder.encode_to_stream(group, stream, True)
        if stream.size() >= CHUNK_BYTES:
            chunks[idx % n].append(stream.get())
            streams[idx % n] = create_OutputStream()
    for i, stream in enumerate(streams):
        if stream.size() or not chunks[i]:
            chunks[i].append(stream.get())
    buf._grouped_output = chunks
    return chunks


def send_in_chunks(
    manager: Any, process_bundle_id: str, read_transform_id: str, byte_streams: Any
) -> None:
    """``BundleManager._send_input_to_worker``, flushing between whole chunks."""
    data_out = manager._worker_handler.data_conn.output_stream(process_bundle_id, read_transform_id)
    for chunk in byte_streams or ():
        data_out.write(chunk)
        data_out.maybe_flush()
    data_out.close()


def input_elements_released(
    channel: Any, instruction_id: str, unused_expected_inputs: Any, abort_callback: Any = None
) -> Iterator[Any]:
    """``InMemoryDataChannel.input_elements``, dropping each queued message once it has been
    handed on: Beam's iterates the queue and empties it only at the end, so a stage's whole
    input (worker side) or output (runner side) stays queued while it is also copied."""
    queue, others, at = channel._inputs, [], 0
    while at < len(queue):  # a message queued meanwhile is still seen, as in Beam's
        element, queue[at] = queue[at], None
        at += 1
        if element is None:  # handed on by an earlier reading left unfinished
            continue
        if element.instruction_id != instruction_id:
            others.append(element)
        elif isinstance(element, beam_fn_api_pb2.Elements.Timers):
            if not element.is_last:
                yield element
        elif isinstance(element, beam_fn_api_pb2.Elements.Data) and (
            element.data or element.is_last
        ):
            yield element
    channel._inputs = others


PART_BYTES = 16 << 20
"""A stage input above this many bytes runs as several bundles of about this size each."""


def _chunks(buf: Any) -> list[bytes] | None:
    """A data input's encoded chunks in order, or None for a buffer of another kind."""
    if isinstance(buf, list):
        return list(buf)
    if isinstance(buf, (execution.ListBuffer, execution.GroupingBuffer)):
        return list(itertools.chain(*buf.partition(1)))
    return None


def _split(chunks: list[bytes], n: int) -> list[list[bytes]]:
    """``chunks`` as ``n`` runs of consecutive chunks, about equal in bytes."""
    total = sum(len(c) for c in chunks) or 1
    parts: list[list[bytes]] = [[] for _ in range(n)]
    seen = 0
    for c in chunks:
        parts[min(n - 1, seen * n // total)].append(c)
        seen += len(c)
    return parts


def _in_parts(
    manager: Any, inputs: Any, timers: Any, output_timers: Any
) -> list[dict[str, list[bytes]]] | None:
    """The stage's data inputs as bundles of about ``PART_BYTES``, or None where it must run
    as one bundle: timers, state, a split manager, a worker that is not in this process, or
    an input of at most ``PART_BYTES``."""
    ctx = manager.bundle_context_manager
    if timers or output_timers or ctx.stage.is_stateful() or manager._select_split_manager():
        return None
    if not all(isinstance(w, worker_handlers.EmbeddedWorkerHandler) for w in ctx.worker_handlers):
        return None
    chunked = {}
    for name, buf in inputs.items():
        chunks = _chunks(buf)
        if chunks is None:
            return None
        chunked[name] = chunks
    size = max((sum(len(c) for c in cs) for cs in chunked.values()), default=0)
    n = min(-(-size // PART_BYTES), max(len(cs) for cs in chunked.values()))
    if n < 2:
        return None
    split = {name: _split(cs, n) for name, cs in chunked.items()}
    del chunked
    for buf in inputs.values():
        _release(buf)
    parts = [{name: got[i] for name, got in split.items()} for i in range(n)]
    return [part for part in parts if any(part.values())]  # no empty bundle


def _release(buf: Any) -> None:
    """Drop the buffer's hold on its chunks, now held by the parts alone, so each part's
    chunks are freed once that part has run. The runner reads a stage's input buffer only
    for that stage (a list buffer read by two stages is copied for each; a group buffer has
    one reader, the group's read), and not again once the bundle ran. Should that ever
    change, a second read fails loudly instead of finding nothing: a list buffer is cleared
    (Beam's own ``clear``: reading it raises), a group buffer marked."""
    if isinstance(buf, execution.ListBuffer):
        buf.clear()
    elif isinstance(buf, execution.GroupingBuffer):
        buf._grouped_output = [[]]
        setattr(buf, _RELEASED, True)


def _merged(a: Any, b: Any) -> Any:
    """Two parts' responses as one, as Beam's ``ParallelBundleManager`` merges its workers':
    metrics consolidated (counters and distributions combined; a gauge or string set is kept
    from one part), residuals of both, the first error."""
    return beam_fn_api_pb2.InstructionResponse(
        instruction_id=a.instruction_id,
        process_bundle=beam_fn_api_pb2.ProcessBundleResponse(
            residual_roots=[*a.process_bundle.residual_roots, *b.process_bundle.residual_roots],
            monitoring_infos=monitoring_infos.consolidate(
                itertools.chain(
                    a.process_bundle.monitoring_infos, b.process_bundle.monitoring_infos
                )
            ),
        ),
        error=a.error or b.error,
    )


def process_in_parts(
    manager: Any,
    inputs: Any,
    expected_outputs: Any,
    fired_timers: Any,
    expected_output_timers: Any,
    dry_run: bool = False,
) -> Any:
    """``BundleManager.process_bundle``, run as bundles of about ``PART_BYTES`` in turn where
    the input is larger: each bundle's output is read into the runner's buffers before the
    next one runs, so only one bundle's output waits in the data channel at a time (the
    in-process worker runs a whole bundle before its output is read). Each bundle reads the
    stage's side inputs again (the SDK caches them per bundle)."""
    original = _ORIGINAL[("BundleManager", "process_bundle")]
    # A dry run (``--direct_runner_bundle_repeat``) runs before the real one on the same input:
    # it must leave the input whole.
    parts = None if dry_run else _in_parts(manager, inputs, fired_timers, expected_output_timers)
    if parts is None:
        return original(
            manager, inputs, expected_outputs, fired_timers, expected_output_timers, dry_run
        )
    merged, splits = None, []
    parts.reverse()
    while parts:
        result, split = original(manager, parts.pop(), expected_outputs, {}, {}, dry_run)
        splits += split
        merged = result if merged is None else _merged(merged, result)
    return merged, splits


_RUNNER = "apache_beam.runners.portability.fn_api_runner"
_PATCHES = (
    (f"{_RUNNER}.execution", "GroupingBuffer", "partition", ["self", "n"], chunked_partition),
    (
        f"{_RUNNER}.fn_runner",
        "BundleManager",
        "_send_input_to_worker",
        ["self", "process_bundle_id", "read_transform_id", "byte_streams"],
        send_in_chunks,
    ),
    (
        "apache_beam.runners.worker.data_plane",
        "InMemoryDataChannel",
        "input_elements",
        ["self", "instruction_id", "unused_expected_inputs", "abort_callback"],
        input_elements_released,
    ),
    (
        f"{_RUNNER}.fn_runner",
        "BundleManager",
        "process_bundle",
        [
            "self",
            "inputs",
            "expected_outputs",
            "fired_timers",
            "expected_output_timers",
            "dry_run",
        ],
        process_in_parts,
    ),
)


def _expected(method: Any, qualname: str, params: list[str]) -> bool:
    """Whether ``method`` is the Beam method this module replaces."""
    try:
        names = list(inspect.signature(method).parameters)
    except (TypeError, ValueError):
        return False
    return getattr(method, "__qualname__", "") == qualname and names == params


def install() -> bool:
    """Use the chunked methods in Beam's in-memory runner (once; later calls are free).
    Returns whether all four are in use."""
    done = 0
    for module, cls_name, name, params, replacement in _PATCHES:
        cls = getattr(importlib.import_module(module), cls_name)
        current = getattr(cls, name, None)
        if current is replacement:
            done += 1
        elif _expected(current, f"{cls_name}.{name}", params):
            _ORIGINAL[(cls_name, name)] = current
            setattr(cls, name, replacement)
            done += 1
        elif name not in _WARNED:
            _WARNED.add(name)
            log.info("Beam's %s.%s is not the one known; left as it is", cls_name, name)
    return done == len(_PATCHES)


def uninstall() -> None:
    """Put Beam's own methods back (for tests comparing the two ways)."""
    for module, cls_name, name, _, _ in _PATCHES:
        original = _ORIGINAL.pop((cls_name, name), None)
        if original is not None:
            setattr(getattr(importlib.import_module(module), cls_name), name, original)
