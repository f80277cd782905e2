"""The reference's observations, shared between the detectors of one worker process.

Test strength observes the reference beside the mutants the tests let through, and the
ambiguity check observes it again beside the passing samples, often on the same probes. For a
family whose differ observes every solution in a run of its own (``separate_observations`` on
the differ: the ``repo`` family runs each solution's probe files in their own pytest run), the
reference's observation of a probe does not depend on what it was observed with, so
``observe`` takes it from the first detector that made it instead of running the reference
again: one sandbox entry (a whole pytest run of the probed test files, for a repo task) less
per task that both detectors observe.

Keyed by content: the family, the task's JSON (its reference, tests and environment) and each
probe's label and payload; at most ``MAX_TASKS`` tasks are kept per process (least recently
used dropped). An observation that was not made (``Observation.not_run``) or a run that failed
(``ProbeInfraError``) is never kept.

It does NOT share: across worker processes or runs (the detector cache keeps whole reports
for that), for families whose ``observe`` runs the solutions of one call together (their
observation of the reference may depend on the batch), or observations of anything but the
reference (a mutant or a sample is observed once anyway). A probe file whose outcome varies
from run to run is seen once for both detectors instead of twice; both then compare against
the same reference outcome.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Sequence

from tasksieve.schemas import TaskRecord
from tasksieve.verifiers.families.probes import Differ, Observation, Probe
from tasksieve.verifiers.sandbox.base import Sandbox

MAX_TASKS = 256

_LOCK = threading.Lock()
_MEMO: OrderedDict[str, dict[str, Observation]] = OrderedDict()
STATS = {"reused": 0, "observed": 0}
"""Reference observations taken from the memo / made, in this process (for benchmarks)."""


def task_key(differ: Differ, task: TaskRecord) -> str:
    blob = f"{differ.family}\0{task.model_dump_json()}"
    return hashlib.sha256(blob.encode()).hexdigest()


def probe_key(probe: Probe) -> str:
    return json.dumps([probe.label, probe.payload], sort_keys=True, default=repr)


def observe(
    differ: Differ,
    task: TaskRecord,
    solutions: Sequence[str],
    probes: Sequence[Probe],
    sandbox: Sandbox,
) -> list[list[Observation]]:
    """``differ.observe(task, [reference, *solutions], probes, sandbox)``; the reference's row
    comes from an earlier call when the differ observes each solution apart and every probe's
    observation of the reference is known. Raises what ``differ.observe`` raises."""
    reference = task.reference_solution
    if not getattr(differ, "separate_observations", False) or not probes:
        return differ.observe(task, [reference, *solutions], probes, sandbox)
    key = task_key(differ, task)
    keys = [probe_key(p) for p in probes]
    with _LOCK:
        known = _MEMO.get(key, {})
        row = [known.get(k) for k in keys]
        if key in _MEMO:
            _MEMO.move_to_end(key)
    if all(o is not None for o in row):
        STATS["reused"] += 1
        rest = differ.observe(task, list(solutions), probes, sandbox) if solutions else []
        return [[o for o in row if o is not None], *rest]
    seen = differ.observe(task, [reference, *solutions], probes, sandbox)
    STATS["observed"] += 1
    made = {k: o for k, o in zip(keys, seen[0], strict=True) if o.observed}
    with _LOCK:
        _MEMO.setdefault(key, {}).update(made)
        _MEMO.move_to_end(key)
        while len(_MEMO) > MAX_TASKS:
            _MEMO.popitem(last=False)
    return seen


def clear() -> None:
    """Forget every kept observation (tests; a worker never needs to)."""
    with _LOCK:
        _MEMO.clear()
        STATS.update(reused=0, observed=0)
