"""The in-memory runner's chunked stage input (``transforms.runtime.chunked_runner``): the same
bytes as Beam's own methods, in whole elements per chunk and per message, and the same results
from a pipeline run either way."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import apache_beam as beam
import pytest
from apache_beam.coders import coders
from apache_beam.coders.coder_impl import create_InputStream, create_OutputStream
from apache_beam.portability.api import beam_fn_api_pb2
from apache_beam.runners.portability.fn_api_runner import execution, worker_handlers
from apache_beam.runners.worker import data_plane
from apache_beam.testing.util import assert_that, equal_to
from apache_beam.transforms import core, window
from apache_beam.utils.windowed_value import WindowedValue

from tasksieve.transforms.runtime import chunked_runner

KV = coders.WindowedValueCoder(
    coders.TupleCoder([coders.StrUtf8Coder(), coders.FastPrimitivesCoder()]),
    coders.GlobalWindowCoder(),
)
GROUPED = coders.WindowedValueCoder(
    coders.TupleCoder([coders.StrUtf8Coder(), coders.IterableCoder(coders.FastPrimitivesCoder())]),
    coders.GlobalWindowCoder(),
)


@pytest.fixture
def beams_own() -> Iterator[None]:
    """Beam's own methods for the test's duration, the chunked ones put back after."""
    was = chunked_runner.install()
    chunked_runner.uninstall()
    yield
    if was:
        chunked_runner.install()


def _buffer(pairs: list[tuple[str, Any]]) -> execution.GroupingBuffer:
    buf = execution.GroupingBuffer(KV, GROUPED, core.Windowing(window.GlobalWindows()))
    out = create_OutputStream()
    for key, value in pairs:
        KV.get_impl().encode_to_stream(
            WindowedValue((key, value), 0, (window.GlobalWindow(),)), out, True
        )
    buf.append(out.get())
    return buf


def _decoded(chunk: bytes) -> list[Any]:
    """Every element of a chunk; fails unless the chunk ends on an element's end."""
    stream, got = create_InputStream(chunk), []
    while stream.size() > 0:
        got.append(GROUPED.get_impl().decode_from_stream(stream, True).value)
    return got


PAIRS = [(f"k{i % 37}", "x" * (i % 200) + str(i)) for i in range(3000)]


@pytest.mark.parametrize("n", [1, 2, 5])
@pytest.mark.parametrize("chunk", [1, 700, 1 << 30])
def test_chunks_join_to_beams_stream(
    n: int, chunk: int, monkeypatch: pytest.MonkeyPatch, beams_own: None
) -> None:
    expected = _buffer(PAIRS).partition(n)  # Beam's own
    monkeypatch.setattr(chunked_runner, "CHUNK_BYTES", chunk)
    buf = _buffer(PAIRS)
    got = chunked_runner.chunked_partition(buf, n)
    assert len(got) == n
    for mine, theirs in zip(got, expected, strict=True):
        assert len(theirs) == 1 and mine  # every worker gets a chunk
        assert b"".join(mine) == theirs[0]
        for part in mine:
            _decoded(part)
    if chunk == 1:
        assert all(len(chunks) == len(range(w, 37, n)) for w, chunks in enumerate(got))
    assert not buf._table  # the decoded values are let go
    assert chunked_runner.chunked_partition(buf, n) is got  # partitioned once, as Beam's
    assert list(buf) == [c for chunks in got for c in chunks]


def test_an_empty_group_table_gives_each_worker_one_empty_chunk(beams_own: None) -> None:
    buf = execution.GroupingBuffer(KV, GROUPED, core.Windowing(window.GlobalWindows()))
    assert chunked_runner.chunked_partition(buf, 3) == [[b""], [b""], [b""]]


class _Conn:
    def __init__(self, threshold: int) -> None:
        self.threshold, self.messages = threshold, list[bytes]()

    def output_stream(self, *_: str) -> data_plane.ClosableOutputStream:
        return data_plane.SizeBasedBufferingClosableOutputStream(
            self.messages.append, self.messages.append, size_flush_threshold=self.threshold
        )


class _Manager:
    def __init__(self, threshold: int) -> None:
        self._worker_handler = type("W", (), {"data_conn": _Conn(threshold)})()


def test_input_is_sent_as_messages_of_whole_chunks() -> None:
    chunks = [bytes([i]) * (10 + i) for i in range(20)]
    manager = _Manager(threshold=40)
    chunked_runner.send_in_chunks(manager, "bundle", "read", chunks)
    messages = manager._worker_handler.data_conn.messages
    assert b"".join(messages) == b"".join(chunks)
    assert len(messages) > 4
    ends = {sum(len(c) for c in chunks[: i + 1]) for i in range(len(chunks))}
    at = 0
    for m in messages[:-1]:
        at += len(m)
        assert at in ends  # a message never splits a chunk
        assert len(m) > 40


def test_install_is_idempotent_and_reversible() -> None:
    was = chunked_runner.install()
    assert was, "Beam's methods changed: review chunked_runner against this Beam"
    assert chunked_runner.install()
    assert execution.GroupingBuffer.partition is chunked_runner.chunked_partition
    chunked_runner.uninstall()
    assert execution.GroupingBuffer.partition is not chunked_runner.chunked_partition
    assert chunked_runner.install()


def test_a_pipeline_gives_the_same_result_with_stage_inputs_over_the_flush_size(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """About 24 MB through a GroupByKey and a fused boundary: several messages per stage."""
    monkeypatch.setattr(chunked_runner, "CHUNK_BYTES", 1 << 20)
    assert chunked_runner.install()
    rows = [(f"k{i % 101}", "v" * 6000 + str(i)) for i in range(4000)]
    expected = [(f"k{k}", sum(1 for i in range(4000) if i % 101 == k)) for k in range(101)]
    with beam.Pipeline(
        options=beam.options.pipeline_options.PipelineOptions(["--direct_running_mode=in_memory"])
    ) as p:
        counted = (
            p
            | beam.Create(rows)
            | beam.Reshuffle()
            | beam.GroupByKey()
            | beam.MapTuple(lambda k, vs: (k, len(list(vs))))
        )
        assert_that(counted, equal_to(expected))


def _data(instruction: str, payload: bytes, last: bool = False) -> Any:
    return beam_fn_api_pb2.Elements.Data(
        instruction_id=instruction, transform_id="t", data=payload, is_last=last
    )


def test_queued_messages_are_released_as_they_are_read() -> None:
    """The same messages as Beam's reading, in order; each gone from the queue once handed
    on; another bundle's messages stay queued."""
    queue = [
        _data("a", b"1"),
        _data("b", b"x"),
        _data("a", b""),
        _data("a", b"2"),
        _data("a", b"", last=True),
    ]
    beams = data_plane.InMemoryDataChannel()
    beams._inputs = list(queue)
    ours = data_plane.InMemoryDataChannel()
    ours._inputs = list(queue)
    expected = list(
        chunked_runner._ORIGINAL.get(
            ("InMemoryDataChannel", "input_elements"), data_plane.InMemoryDataChannel.input_elements
        )(beams, "a", None)
    )
    got = []
    for element in chunked_runner.input_elements_released(ours, "a", None):
        got.append(element)
        assert element not in ours._inputs  # released before the reader is done with it
    assert got == expected == [queue[0], queue[3], queue[4]]
    assert ours._inputs == beams._inputs == [queue[1]]


def test_split_keeps_chunks_in_order_and_about_equal() -> None:
    chunks = [bytes(n) for n in (5, 1, 1, 9, 2, 2, 4, 8)]
    parts = chunked_runner._split(chunks, 3)
    assert [c for p in parts for c in p] == chunks
    assert len(parts) == 3 and all(parts)
    assert max(sum(map(len, p)) for p in parts) <= 16


class _CountBundles(beam.DoFn):
    def start_bundle(self) -> None:
        beam.metrics.Metrics.counter("t", "bundles").inc()

    def process(self, kv: tuple[str, str], sizes: dict[str, int]) -> Iterator[tuple[str, int]]:
        beam.metrics.Metrics.counter("t", "elements").inc()
        yield kv[0], len(kv[1]) + sizes[kv[0]]


def test_a_large_stage_input_runs_as_several_bundles_with_the_same_result(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """About 24 MB of stage input in bundles of 1 MB: the same output, counters summed over
    the bundles, a side input seen by every bundle."""
    monkeypatch.setattr(chunked_runner, "CHUNK_BYTES", 256 << 10)
    monkeypatch.setattr(chunked_runner, "PART_BYTES", 1 << 20)
    assert chunked_runner.install()
    rows = [(f"k{i % 101}", "v" * 6000 + str(i)) for i in range(4000)]
    sizes = {f"k{k}": k for k in range(101)}
    expected = [(k, len(v) + sizes[k]) for k, v in rows]
    p = beam.Pipeline(
        options=beam.options.pipeline_options.PipelineOptions(["--direct_running_mode=in_memory"])
    )
    side = p | "Sizes" >> beam.Create(sorted(sizes.items()))
    got = (
        p
        | beam.Create(rows)
        | beam.Reshuffle()
        | beam.ParDo(_CountBundles(), beam.pvalue.AsDict(side))
    )
    assert_that(got, equal_to(expected))
    result = p.run()
    result.wait_until_finish()
    counters = {c.key.metric.name: c.committed for c in result.metrics().query()["counters"]}
    assert counters["elements"] == len(rows)
    assert counters["bundles"] > 10  # about 24 bundles of 1 MB


class _Stage:
    def __init__(self, stateful: bool) -> None:
        self.stateful = stateful

    def is_stateful(self) -> bool:
        return self.stateful


class _Context:
    def __init__(self, stateful: bool) -> None:
        self.stage = _Stage(stateful)
        self.worker_handlers = [object.__new__(worker_handlers.EmbeddedWorkerHandler)]


class _Bundles:
    def __init__(self, stateful: bool = False) -> None:
        self.bundle_context_manager = _Context(stateful)

    def _select_split_manager(self) -> None:
        return None


def test_the_parts_alone_hold_a_split_input(monkeypatch: pytest.MonkeyPatch) -> None:
    """Once split, the stage's buffer lets go of its chunks (each part's are freed once it
    ran); a stateful stage, or an input within one part, is left whole."""
    monkeypatch.setattr(chunked_runner, "PART_BYTES", 100)
    chunks = [bytes([i]) * 60 for i in range(7)]

    def buffer() -> execution.ListBuffer:
        buf = execution.ListBuffer(None)
        for c in chunks:
            buf.append(c)
        return buf

    buf = buffer()
    parts = chunked_runner._in_parts(_Bundles(), {"t": buf}, {}, {})
    assert parts is not None and len(parts) == 5
    assert [c for part in parts for c in part["t"]] == chunks
    with pytest.raises(RuntimeError, match="cleared"):  # read again: loud, never empty
        list(buf)
    kept = buffer()
    assert chunked_runner._in_parts(_Bundles(stateful=True), {"t": kept}, {}, {}) is None
    assert list(kept) == chunks
    monkeypatch.setattr(chunked_runner, "PART_BYTES", 1000)
    assert chunked_runner._in_parts(_Bundles(), {"t": kept}, {}, {}) is None
    assert list(kept) == chunks


def test_a_dry_run_leaves_the_input_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    """``--direct_runner_bundle_repeat`` runs dry bundles before the real one on the same
    input: a dry run is one bundle and lets go of nothing."""
    monkeypatch.setattr(chunked_runner, "PART_BYTES", 100)
    calls: list[tuple[list[bytes], bool]] = []

    def original(manager: Any, inputs: Any, out: Any, fired: Any, timers: Any, dry: bool) -> Any:
        calls.append((list(inputs["t"]), dry))
        return beam_fn_api_pb2.InstructionResponse(), []

    monkeypatch.setitem(chunked_runner._ORIGINAL, ("BundleManager", "process_bundle"), original)
    chunks = [bytes([i]) * 60 for i in range(4)]
    buf = execution.ListBuffer(None)
    for c in chunks:
        buf.append(c)
    manager = _Bundles()
    chunked_runner.process_in_parts(manager, {"t": buf}, {}, {}, {}, dry_run=True)
    assert calls == [(chunks, True)] and list(buf) == chunks
    chunked_runner.process_in_parts(manager, {"t": buf}, {}, {}, {})
    assert [c for got, _ in calls[1:] for c in got] == chunks and len(calls) == 1 + 3
    assert buf.cleared


def test_a_group_buffer_read_again_after_its_stage_ran_in_parts_fails_loudly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert chunked_runner.install()
    monkeypatch.setattr(chunked_runner, "CHUNK_BYTES", 64)
    monkeypatch.setattr(chunked_runner, "PART_BYTES", 200)
    buf = _buffer([(f"k{i}", "v" * 50) for i in range(40)])
    parts = chunked_runner._in_parts(_Bundles(), {"t": buf}, {}, {})
    assert parts is not None and len(parts) > 1
    with pytest.raises(RuntimeError, match="read again"):
        buf.partition(1)
