"""The run's Beam counters for the manifest, and the conservation check that uses them.

Counters are read as committed values: what the bundles that succeeded counted, so a bundle
a runner retried counts once. The in-memory and multi-process DirectRunner, the Python job
service behind the PortableRunner and Dataflow report committed values. Flink and Spark
report attempted values only (every attempt counted, retries included); then the values are
kept, marked ``attempted`` in the manifest, and conservation can only be half checked: more
records written than ingested still fails the run (attempted counts never undercount), while
fewer written than ingested may be a retried ingest bundle rather than a lost record, so the
run is published with ``conservation`` saying it is unverified and a warning in the log.

What it does NOT guard against: a runner that reports committed values wrongly; a worker
process whose first sandbox counter was lost with a failed bundle is missing from
``used_by_workers`` (each process reports its sandbox once).
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from dataclasses import dataclass
from typing import Any

from apache_beam.metrics.metric import MetricsFilter

from tasksieve.transforms.runtime.common import NAMESPACE, SANDBOX_NAMESPACE

log = logging.getLogger("tasksieve")


class ConservationError(RuntimeError):
    """Input records do not equal kept + rejected: a record was lost (a bug)."""


@dataclass(frozen=True)
class CounterValues:
    """Counter name -> value summed over steps, and whether every value was committed."""

    values: dict[str, int]
    committed: bool

    @property
    def kind(self) -> str:
        return "committed" if self.committed else "attempted"


def read_counters(result: Any, namespace: str = NAMESPACE) -> CounterValues:
    """The counters of ``namespace``: committed values, or attempted where the runner has none."""
    values: Counter[str] = Counter()
    committed = True
    metrics = result.metrics().query(MetricsFilter().with_namespace(namespace))
    for c in metrics["counters"]:
        if c.committed is None:
            committed = False
            value = c.attempted
        else:
            value = c.committed
        values[c.key.metric.name] += int(value or 0)
    return CounterValues(dict(sorted(values.items())), committed)


def read_sandboxes(result: Any) -> list[dict[str, Any]]:
    """The distinct sandbox ``describe()`` results of the workers, with how many worker
    processes used each (each process reports its shared sandbox once)."""
    seen = read_counters(result, SANDBOX_NAMESPACE)
    return [{**json.loads(k), "processes": n} for k, n in seen.values.items()]


def check_conservation(n_in: int, kept: int, rejected: int, committed: bool) -> str:
    """Raise ``ConservationError`` when ``n_in != kept + rejected`` can only be a bug; return
    how conservation was checked (``exact``, or why it is unverified)."""
    out = kept + rejected
    if committed:
        if n_in != out:
            raise ConservationError(f"input {n_in} != kept {kept} + rejected {rejected}")
        return "exact"
    if n_in < out:  # attempted counts never undercount: records were written twice
        raise ConservationError(
            f"input {n_in} (attempted counter) < kept {kept} + rejected {rejected}"
        )
    if n_in == out:
        return "consistent (attempted counters: the runner reports no committed values)"
    why = (
        f"unverified: the runner reports attempted counters only; {n_in} attempted input "
        f"records > kept {kept} + rejected {rejected} (a retried bundle or a lost record)"
    )
    log.warning("conservation %s", why)
    return why
