"""The curate run's progress display: a channel for the stages, bars on a terminal, lines otherwise.

``CurateProgress`` is a context manager around the run. It makes a private channel directory,
names it in ``TASKSIEVE_PROGRESS`` for the run's processes (and, through ``pipeline_args``, in
the ``--tasksieve_progress`` pipeline option for SDK workers of a portable runner), and reads
what the stages report (``stage_counts``). On a terminal it draws one rich progress bar per
stage as it goes (done of total, samples, rate, time left where the total is known); otherwise
it draws nothing live and prints one summary line per stage when the run ends. Leaving the
block restores the environment and removes the channel.

It does NOT show what workers on other machines do (a remote runner's workers write to their
own disks), nor anything from a runner that ignores both the environment and the pipeline
option; then the bars stay empty and the summary lines say the stage reported nothing.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
from types import TracebackType
from typing import TextIO

from apache_beam.options.pipeline_options import PipelineOptions
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
)

from tasksieve.pipeline.curate.stage_counts import ChannelReader, StageSpec, StageView, stage_views
from tasksieve.transforms.runtime import progress

POLL_S = 0.5
"""How often the bars read the channel."""
HEARTBEAT_S = 60.0
"""How often, off a terminal, one line says how far the stages are while the run goes on."""


class ProgressOptions(PipelineOptions):
    """The ``--tasksieve_progress`` pipeline option (so Beam hands it to SDK workers)."""

    @classmethod
    def _add_argparse_args(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            f"--{progress.OPTION}",
            default=None,
            help="directory of the live progress channel (set by tasksieve curate)",
        )


def pipeline_args() -> list[str]:
    """The pipeline option naming this process's channel, if one is open."""
    directory = os.environ.get(progress.ENV)
    return [f"--{progress.OPTION}={directory}"] if directory else []


def _rate(done: int, seconds: float) -> str:
    """``12.5/s``, or ``2.7/min`` under one a second; ``-`` before there is one."""
    if seconds <= 0 or not done:
        return "-"
    per_s = done / seconds
    return f"{per_s:.1f}/s" if per_s >= 1 else f"{per_s * 60:.1f}/min"


def _seconds(s: float) -> str:
    return f"{s:.1f} s" if s < 120 else f"{int(s // 60)} min {int(s % 60)} s"


def summary_line(view: StageView) -> str:
    """One line: ``Gates: 5 of 5 tasks in 3.2 s (1.6/s)``; ``of`` only with a known total."""
    spec = view.spec
    if view.started is None and not view.done:
        return f"{spec.label}: no {spec.unit} reported"
    of = f" of {view.total}" if view.total is not None else ""
    text = f"{spec.label}: {view.done}{of} {spec.unit}"
    if view.samples is not None:
        total = f" of {view.samples_total}" if view.samples_total is not None else ""
        what = "rollout rows" if spec.key == "write" else "samples"
        text += f", {view.samples}{total} {what}"
    if view.elapsed > 0:
        return f"{text} in {_seconds(view.elapsed)} ({_rate(view.done, view.elapsed)})"
    return f"{text} in under {progress.INTERVAL_S} s"


def heartbeat_line(views: list[StageView]) -> str:
    """How far every stage that has started is: ``Gates 12/40, Rollouts 3/38 tasks, ...``."""
    parts = []
    for view in views:
        if view.started is None and not view.done:
            continue
        of = f"/{view.total}" if view.total is not None else ""
        parts.append(f"{view.spec.label} {view.done}{of} {view.spec.unit}")
    return ", ".join(parts) if parts else "no stage has reported yet"


class CurateProgress:
    """Open a channel for one run; draw bars on a terminal, print lines at the end otherwise."""

    def __init__(
        self,
        stages: list[StageSpec],
        samples_per_task: int,
        console: Console,
        *,
        live: bool | None = None,
        out: TextIO | None = None,
    ) -> None:
        self.stages = stages
        self.k = samples_per_task
        self.console = console
        self.live = console.is_terminal if live is None else live
        self.out = out
        self.heartbeat_s = HEARTBEAT_S
        self.directory = ""
        self.reader: ChannelReader | None = None
        self._previous: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._bars: Progress | None = None
        self._tasks: dict[str, TaskID] = {}

    def __enter__(self) -> CurateProgress:
        self.directory = tempfile.mkdtemp(prefix="tasksieve-progress-")
        self.reader = ChannelReader(self.directory)
        self._previous = os.environ.get(progress.ENV)
        os.environ[progress.ENV] = self.directory
        if self.live:
            self._start_bars()
        self._thread = threading.Thread(target=self._poll_loop, name="progress", daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        progress.flush()  # the in-memory runner's counts were made in this process
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        assert self.reader is not None
        self.reader.poll()
        if self._bars is not None:
            self._update()
            self._bars.stop()
        progress.use(None)  # the in-memory runner's channel step named it for this process
        if self._previous is None:
            os.environ.pop(progress.ENV, None)
        else:
            os.environ[progress.ENV] = self._previous
        shutil.rmtree(self.directory, ignore_errors=True)

    def views(self, counters: dict[str, int] | None = None) -> list[StageView]:
        """How far each stage is; ``counters`` (the manifest's) override what was reported."""
        assert self.reader is not None
        merged = dict(self.reader.counters)
        merged.update(counters or {})
        return stage_views(self.stages, merged, self.k, self.reader)

    def print_summary(self, counters: dict[str, int] | None = None) -> None:
        """One line per stage (not on a terminal, where the bars stay on screen)."""
        if self.live:
            return
        out = self.out or sys.stderr
        for view in self.views(counters):
            print(f"progress: {summary_line(view)}", file=out)

    def _start_bars(self) -> None:
        self._bars = Progress(
            TextColumn("{task.description:<14}"),
            BarColumn(bar_width=16),
            MofNCompleteColumn(),
            TextColumn("{task.fields[unit]}{task.fields[samples]}"),
            TextColumn("{task.fields[rate]}"),
            TimeRemainingColumn(),
            console=self.console,
            transient=False,
        )
        for spec in self.stages:
            self._tasks[spec.key] = self._bars.add_task(
                spec.label, total=None, unit=spec.unit, samples="", rate="", visible=False
            )
        self._bars.start()

    def _poll_loop(self) -> None:
        assert self.reader is not None
        while not self._stop.wait(POLL_S if self.live else self.heartbeat_s):
            if self.reader.poll() and self.live:
                self._update()
            elif not self.live:
                print(f"progress: {heartbeat_line(self.views())}", file=self.out or sys.stderr)

    def _update(self) -> None:
        assert self._bars is not None
        for view in self.views():
            if view.started is None and not view.done:
                continue
            samples = ""
            if view.samples is not None:
                of = f"/{view.samples_total}" if view.samples_total is not None else ""
                what = "rollout rows" if view.spec.key == "write" else "samples"
                samples = f" {view.samples}{of} {what}"
            self._bars.update(
                self._tasks[view.spec.key],
                completed=view.done,
                total=view.total,
                samples=samples,
                rate=_rate(view.done, view.elapsed),
                visible=True,
            )
