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

``install()`` replaces those three methods:

- ``send_in_chunks``: the same chunks written in the same order, the stream flushed after each
  whole chunk once it holds the data channel's flush size (10 MB), as the worker already does
  for its own outputs. A chunk holds whole elements (a worker's output message or whole
  groups), so every message does.
- ``chunked_partition``: the same groups, in the same order and assignment to workers,
  encoded into chunks of about ``CHUNK_BYTES``, each table entry dropped once it is encoded.
- ``input_elements_released``: the same messages yielded in the same order, each dropped from
  the queue once handed on.

What reaches the stage is the same: the bytes of the chunks, joined, equal the stream Beam would
have built (``tests/transforms/test_chunked_runner.py``). Each method is replaced only where it
is the one this module was written against (checked by qualified name and parameters); another
Beam keeps its own, and ``install()`` says so.
"""

from __future__ import annotations

import importlib
import inspect
import logging
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from apache_beam.coders.coder_impl import create_OutputStream
from apache_beam.portability.api import beam_fn_api_pb2
from apache_beam.transforms import trigger
from apache_beam.transforms.window import GlobalWindow, GlobalWindows
from apache_beam.utils import windowed_value

log = logging.getLogger("tasksieve")

CHUNK_BYTES = 8 << 20
"""A chunk is cut once it holds at least this many bytes (whole groups only)."""

_ORIGINAL: dict[tuple[str, str], Any] = {}  # (class, method) -> Beam's own, while replaced
_WARNED: set[str] = set()


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
    Returns whether all three are in use."""
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
