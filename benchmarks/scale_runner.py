"""A Beam runner for benchmarks: the in-memory runner, keeping each run's result for its timers.

``CurateConfig(runner=TIMED_RUNNER)`` runs the curate pipeline exactly as the in-memory
DirectRunner does (the same ``FnApiRunner``) and keeps the ``PipelineResult``, whose monitoring
infos carry Beam's own per-transform execution time (``total_msecs``: start, process and
finish bundle, sampled by the SDK's state sampler on the bundle thread). Fused stages are
therefore still timed apart. What it does NOT time: the runner's own shuffling between fused
stages (left unattributed), and work a stage hands to other threads while its bundle thread
is not waiting on it.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, ClassVar

from apache_beam.metrics import monitoring_infos
from apache_beam.runners.portability.fn_api_runner import FnApiRunner

TIMED_RUNNER = "benchmarks.scale_runner.TimedRunner"
_TOTAL = monitoring_infos.TOTAL_MSECS_URN


class TimedRunner(FnApiRunner):
    """The in-memory FnApiRunner; every result it returns is also kept in ``results``."""

    results: ClassVar[list[Any]] = []

    def run_pipeline(self, pipeline: Any, options: Any) -> Any:
        result = super().run_pipeline(pipeline, options)
        TimedRunner.results.append(result)
        return result


def stage_seconds(result: Any) -> dict[str, float]:
    """Execution seconds per top-level transform (``NearDedup/Buckets/...`` -> ``NearDedup``)."""
    out: Counter[str] = Counter()
    for info in result.monitoring_infos():
        if info.urn != _TOTAL:
            continue
        name = info.labels.get("PTRANSFORM", "")
        if name.startswith("ref_"):  # the runner's own PCollection reads, not a transform
            continue
        out[name.split("/", 1)[0]] += monitoring_infos.extract_counter_value(info) / 1000.0
    return dict(out)
