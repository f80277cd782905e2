"""How far each curate stage is, from the counters its workers report to the progress channel.

``ChannelReader`` adds up the deltas that ``tasksieve.transforms.runtime.progress`` appends to
the channel directory (one file per process) and remembers when each counter first and last
moved. ``curate_stages`` lists the stages a run's config builds, each with the counters that
make its "done": what it passed on (``gates.passed``) plus what it rejected (``rejected@gates``,
reported by every rejection). ``stage_views`` turns the counters into done / total per stage.

The total of a stage is what reached it so far: the input records for Validate, then the total
of the stage before less what that stage rejected. That is exact once the stage before has
finished and an upper bound until then; Rollouts and Verify also count samples (tasks x K).
It does NOT see counts a worker has not yet written (at most ``INTERVAL_S`` behind) nor any
from workers on other machines, and a retried bundle counts twice: the manifest's counters,
not these, are the run's record.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

from tasksieve.transforms.runtime.progress import SUFFIX

VERDICTS = ("pass", "fail", "timeout", "error", "infra_error")


class ChannelReader:
    """Incrementally read every event file of a channel directory."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.counters: dict[str, int] = {}
        self.first: dict[str, float] = {}
        self.last: dict[str, float] = {}
        self._offsets: dict[str, int] = {}

    def poll(self) -> int:
        """Read what was appended since the last poll; returns the number of events read."""
        try:
            names = sorted(n for n in os.listdir(self.directory) if n.endswith(SUFFIX))
        except OSError:
            return 0
        events = 0
        for name in names:
            path = os.path.join(self.directory, name)
            offset = self._offsets.get(name, 0)
            try:
                with open(path, "rb") as f:
                    f.seek(offset)
                    data = f.read()
            except OSError:
                continue
            complete = data[: data.rfind(b"\n") + 1]  # a line being written waits for the next poll
            self._offsets[name] = offset + len(complete)
            for line in complete.splitlines():
                events += self._apply(line)
        return events

    def _apply(self, line: bytes) -> int:
        try:
            event = json.loads(line)
            at, deltas = float(event["t"]), dict(event["c"])
        except (ValueError, KeyError, TypeError):
            return 0  # not ours, or damaged: progress is best effort
        for name, delta in deltas.items():
            if not isinstance(delta, int):
                continue
            self.counters[name] = self.counters.get(name, 0) + delta
            self.first[name] = min(self.first.get(name, at), at)
            self.last[name] = max(self.last.get(name, at), at)
        return 1


@dataclass(frozen=True)
class StageSpec:
    """One stage as the display sees it: its label and the counters of its work."""

    key: str
    """The stage's name in rejection rows (``rejected@<key>``)."""
    label: str
    done: tuple[str, ...]
    """Counters that add up to the work done (besides the stage's rejections)."""
    unit: str = "tasks"
    minus: tuple[str, ...] = ()
    """Counters already inside ``done`` that the stage also rejected (counted once)."""
    samples: bool = False
    """Whether the stage also reports samples (tasks x K)."""
    open_total: bool = False
    """Whether the stage's total cannot be known ahead (adaptive sampling stops early)."""

    def names(self) -> tuple[str, ...]:
        """Every counter whose moves say the stage is working."""
        return (*self.done, f"rejected@{self.key}")


@dataclass(frozen=True)
class StageView:
    """How far one stage is: done of total (None: unknown), samples, first and last move."""

    spec: StageSpec
    done: int
    total: int | None
    samples: int | None = None
    samples_total: int | None = None
    started: float | None = None
    ended: float | None = None
    extra: dict[str, int] = field(default_factory=dict)

    @property
    def elapsed(self) -> float:
        if self.started is None or self.ended is None:
            return 0.0
        return max(self.ended - self.started, 0.0)


def _verdicts() -> tuple[str, ...]:
    return tuple(f"verify.{v}" for v in VERDICTS)


def curate_stages(
    *, strength: bool = False, ambiguity: bool = False, rollouts: str = "one-shot"
) -> list[StageSpec]:
    """The stages of a curate run in data-flow order (``pipeline/curate/build.py``).

    ``rollouts`` is ``one-shot`` (Rollouts then Verify), ``adaptive`` or ``episodes`` (one
    stage that samples and verifies, counted in samples, total unknown ahead).
    """
    stages = [
        StageSpec(
            "validate", "Validate", ("validate.ok",), minus=("rejected.validate.duplicate_id",)
        ),
        StageSpec("exact_dedup", "Exact dedup", ("exact_dedup.kept",)),
        StageSpec("near_dedup", "Near dedup", ("near_dedup.kept",)),
        StageSpec("decontaminate", "Decontaminate", ("decontaminate.clean",)),
        StageSpec("gates", "Gates", ("gates.passed",)),
    ]
    if strength:
        names = ("strength.tasks", "strength.unsupported", "strength.remote")
        minus = ("strength.rejected",)  # measured, then rejected: in strength.tasks already
        stages.append(StageSpec("test_strength", "Test strength", names, minus=minus))
    if rollouts == "one-shot":
        stages.append(StageSpec("rollouts", "Rollouts", ("rollouts.sampled",), samples=True))
        stages.append(StageSpec("verify", "Verify", _verdicts(), unit="samples"))
    else:
        label = "Adaptive rollouts" if rollouts == "adaptive" else "Episodes"
        stages.append(StageSpec("verify", label, _verdicts(), unit="samples", open_total=True))
    if ambiguity:
        names = ("ambiguity.tasks", "ambiguity.unsupported", "ambiguity.remote")
        minus = ("ambiguity.rejected",)
        stages.append(StageSpec("ambiguity", "Ambiguity", names, minus=minus))
    stages.append(StageSpec("filter", "Filter", ("filter.kept",)))
    stages.append(StageSpec("write", "Write", ("write.tasks", "write.rejected"), unit="rows"))
    return stages


def _span(spec: StageSpec, reader: ChannelReader | None) -> tuple[float | None, float | None]:
    if reader is None:
        return None, None
    names = [*spec.names(), *spec.minus]
    firsts = [reader.first[n] for n in names if n in reader.first]
    lasts = [reader.last[n] for n in names if n in reader.last]
    return (min(firsts), max(lasts)) if firsts else (None, None)


def stage_views(
    stages: list[StageSpec],
    counters: dict[str, int],
    k: int,
    reader: ChannelReader | None = None,
) -> list[StageView]:
    """Done and total of every stage from the counters (``k``: samples asked per task)."""
    c = counters.get
    records = c("ingest.records", 0)
    reaching: int | None = records  # tasks that reached the stage so far (at most)
    samples_reaching: int | None = None
    views = []
    for spec in stages:
        rejected = c(f"rejected@{spec.key}", 0)
        done = sum(c(n, 0) for n in spec.done) - sum(c(n, 0) for n in spec.minus)
        started, ended = _span(spec, reader)
        view: StageView
        if spec.key == "write":
            rows = records  # every record ends as a task row or a rejection row
            view = StageView(spec, done, rows, c("write.rollouts", 0), None, started, ended)
        elif spec.unit == "samples":
            total = None if spec.open_total else samples_reaching
            if total is None and reaching is not None and not spec.open_total:
                total = reaching * k
            view = StageView(spec, done, total, None, None, started, ended, {"rejected": rejected})
        else:
            done += rejected
            samples = samples_total = None
            if spec.samples:
                drawn = c("rollouts.sampled", 0) * k - c("rollouts.samples_missing", 0)
                samples, samples_total = drawn, None if reaching is None else reaching * k
            view = StageView(spec, done, reaching, samples, samples_total, started, ended)
            if spec.samples and reaching is not None:
                samples_reaching = (reaching - rejected) * k - c("rollouts.samples_missing", 0)
        views.append(view)
        if reaching is not None:
            reaching = max(reaching - rejected, 0)
    return views
