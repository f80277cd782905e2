"""Conservation uses committed counter values, and says so when a runner has none."""

from __future__ import annotations

from typing import Any

import apache_beam as beam
import pytest
from apache_beam.metrics.execution import MetricKey, MetricResult
from apache_beam.metrics.metricbase import MetricName
from apache_beam.options.pipeline_options import PipelineOptions

from tasksieve.pipeline.curate.counters import ConservationError, check_conservation, read_counters
from tasksieve.transforms.runtime.common import NAMESPACE, count


def _counted(x: int) -> int:
    count("ingest.records")
    return x


def test_a_direct_run_reports_committed_values() -> None:
    p = beam.Pipeline(options=PipelineOptions(["--direct_running_mode=in_memory"]))
    _ = p | beam.Create(range(5)) | beam.Map(_counted)
    result = p.run()
    result.wait_until_finish()
    read = read_counters(result)
    assert read.committed and read.kind == "committed"
    assert read.values == {"ingest.records": 5}


class _AttemptedOnly:
    """The query answer of a runner that reports attempted values only (Flink, Spark):
    real Beam ``MetricResult`` objects with ``committed`` None."""

    def __init__(self, values: dict[str, int]) -> None:
        self.results = [
            MetricResult(MetricKey("step", MetricName(NAMESPACE, name)), None, v)
            for name, v in values.items()
        ]

    def metrics(self) -> _AttemptedOnly:
        return self

    def query(self, _filter: Any) -> dict[str, list[MetricResult]]:
        return {"counters": self.results, "distributions": [], "gauges": []}


def test_attempted_values_are_read_and_marked_attempted() -> None:
    read = read_counters(_AttemptedOnly({"ingest.records": 7}))
    assert read.values == {"ingest.records": 7}
    assert not read.committed and read.kind == "attempted"


@pytest.mark.parametrize(("n_in", "kept", "rejected"), [(10, 4, 5), (10, 6, 5), (0, 0, 1)])
def test_committed_values_must_balance_exactly(n_in: int, kept: int, rejected: int) -> None:
    with pytest.raises(ConservationError):
        check_conservation(n_in, kept, rejected, committed=True)


def test_committed_values_that_balance_are_exact() -> None:
    assert check_conservation(9, 4, 5, committed=True) == "exact"


def test_attempted_values_below_the_written_records_fail() -> None:
    with pytest.raises(ConservationError, match="attempted"):
        check_conservation(8, 4, 5, committed=False)


def test_attempted_values_above_the_written_records_are_unverified() -> None:
    got = check_conservation(12, 4, 5, committed=False)
    assert got.startswith("unverified") and "12" in got


def test_attempted_values_that_balance_are_consistent_not_exact() -> None:
    got = check_conservation(9, 4, 5, committed=False)
    assert got != "exact" and got.startswith("consistent")
