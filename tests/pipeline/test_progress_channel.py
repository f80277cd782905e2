"""The progress channel: counts made in Beam DoFns arrive at the reader, batched, or not at all."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from tasksieve.pipeline.curate.local_portable import local_portable
from tasksieve.pipeline.curate.progress import ProgressOptions
from tasksieve.pipeline.curate.stage_counts import ChannelReader
from tasksieve.transforms.runtime import progress
from tasksieve.transforms.runtime.common import count, rejected, use_progress_channel

N = 40


class CountFn(beam.DoFn):
    """Count every element; reject the odd ones (as a stage called ``validate`` would)."""

    def process(self, n: int) -> Iterator[Any]:
        count("probe.seen")
        if n % 2:
            yield rejected({"reason": "validate.schema", "stage": "validate"})
        else:
            yield n


def _run(*options: str, channel: str | None = None) -> None:
    with beam.Pipeline(options=PipelineOptions(list(options))) as p:
        numbers = use_progress_channel(p | beam.Create(range(N)), channel)
        _ = numbers | beam.ParDo(CountFn()).with_outputs("rejected", main="ok")
    progress.flush()


def _read(channel: Path) -> dict[str, int]:
    reader = ChannelReader(str(channel))
    reader.poll()
    return reader.counters


@pytest.fixture
def channel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "channel"
    path.mkdir()
    monkeypatch.setenv(progress.ENV, str(path))
    return path


def test_counts_of_an_in_memory_pipeline_arrive_at_the_reader(channel: Path) -> None:
    _run("--direct_running_mode=in_memory")
    got = _read(channel)
    assert got["probe.seen"] == N
    assert got["rejected@validate"] == N // 2
    assert got["rejected.validate.schema"] == N // 2


@pytest.mark.slow
def test_counts_of_multi_process_workers_arrive_at_the_reader(channel: Path) -> None:
    _run("--direct_running_mode=multi_processing", "--direct_num_workers=2")
    assert _read(channel)["probe.seen"] == N
    assert not [f for f in os.listdir(channel) if f.startswith(f"{os.getpid()}-")]


@pytest.mark.slow
def test_portable_worker_pool_is_named_the_channel_by_the_pipeline_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(progress.ENV, raising=False)  # the pool never saw it anyway
    path = tmp_path / "channel"
    path.mkdir()
    with local_portable() as endpoints:
        _run(*endpoints.beam_args(), channel=str(path))
    assert _read(path)["probe.seen"] == N
    assert progress.channel() is None  # the driver process itself was not named it


def test_the_channel_option_is_a_known_pipeline_option() -> None:
    options = PipelineOptions([f"--{progress.OPTION}=channel-dir"])
    assert options.view_as(ProgressOptions).get_all_options()[progress.OPTION] == "channel-dir"


def test_no_channel_no_events_and_no_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(progress.ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    before = dict(progress._writers)
    _run("--direct_running_mode=in_memory")
    assert progress.channel() is None
    assert progress._writers == before
    assert list(tmp_path.iterdir()) == []


def test_many_counts_are_written_as_few_lines(channel: Path) -> None:
    for _ in range(10_000):
        progress.report("probe.burst")
    progress.flush()
    lines = [line for f in channel.iterdir() for line in f.read_text().splitlines()]
    assert sum(json.loads(line)["c"]["probe.burst"] for line in lines) == 10_000
    assert len(lines) < 100  # one line per INTERVAL_S, not one per count


def test_a_quiet_stage_is_written_without_another_count(channel: Path) -> None:
    writer = progress._writer(str(channel))
    progress.report("probe.once")
    assert writer.armed  # the timer writes it within INTERVAL_S, no later count needed
    writer.flush()
    assert _read(channel) == {"probe.once": 1}


def test_a_channel_that_went_away_turns_reporting_off(channel: Path) -> None:
    channel.rmdir()
    progress.report("probe.lost")
    progress.flush()  # no exception: the run goes on
    assert progress._writer(str(channel)).broken


@pytest.mark.parametrize(
    "line",
    [
        b"not json\n",
        b'{"t": 1}\n',
        b'{"c": {"probe.x": 1}}\n',
        b'{"t": "soon", "c": {"probe.x": 1}}\n',
        b'{"t": 1, "c": {"probe.x": "1"}}\n',
        b'{"t": 1, "c": ["probe.x"]}\n',
        b"\xff\xfe\n",
    ],
)
def test_the_reader_skips_lines_that_are_not_events(tmp_path: Path, line: bytes) -> None:
    good = b'{"t": 1, "c": {"probe.x": 2}}\n'
    (tmp_path / f"1-a{progress.SUFFIX}").write_bytes(line + good)
    assert _read(tmp_path) == {"probe.x": 2}


def test_the_reader_waits_for_a_line_to_be_complete(tmp_path: Path) -> None:
    path = tmp_path / f"1-a{progress.SUFFIX}"
    path.write_bytes(b'{"t": 1, "c": {"probe.x": 1}}\n{"t": 2, "c": {"pro')
    reader = ChannelReader(str(tmp_path))
    reader.poll()
    assert reader.counters == {"probe.x": 1}
    with path.open("ab") as f:
        f.write(b'be.x": 5}}\n')
    reader.poll()
    assert reader.counters == {"probe.x": 6}
    assert (reader.first["probe.x"], reader.last["probe.x"]) == (1.0, 2.0)
