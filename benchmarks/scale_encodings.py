"""What the host-only stages on Beam pickle between stages, counted by element type.

    PYTHONPATH=. .venv/bin/python -m benchmarks.scale_encodings TASKS_DIR OUT_DIR

Beam's coder writes ints (within 64 bits), strings, bytes, tuples, lists and dicts of them
itself and pickles everything else (dataclasses such as ``Item``, numpy arrays, ints beyond
64 bits). Every pickled element is one encoding at a stage boundary of the in-memory runner
(a GroupByKey, a side input's wait, a Flatten of several inputs), decoded once on the other
side: the count says how often each kind of record is (de)serialised per input record. The
run is ``scale_stages.host_beam`` on the timed in-memory runner, as in ``benchmarks.scale``.
"""

from __future__ import annotations

import argparse
import pickle
import sys
from collections import Counter
from typing import Any

from apache_beam.coders import coders

from benchmarks.timing import run_reported

COUNTS: Counter[str] = Counter()
_DUMPS = pickle.dumps


def counting_dumps(obj: Any, protocol: int | None = None, *args: Any, **kwargs: Any) -> bytes:
    """``pickle.dumps`` that counts each call by the type of what it pickles."""
    COUNTS[type(obj).__name__] += 1
    return _DUMPS(obj, protocol, *args, **kwargs)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("tasks", help="a directory or file of tasks (e.g. a scale corpus)")
    ap.add_argument("out", help="where the run writes its rows")
    args = ap.parse_args(argv)
    coders.pickle.dumps = counting_dumps  # the module PickleCoder calls
    from benchmarks import scale_stages
    from benchmarks.scale_runner import TIMED_RUNNER
    from tasksieve.pipeline.curate.config import CurateConfig
    from tasksieve.pipeline.curate.counters import read_counters

    cfg = CurateConfig(inputs=(args.tasks,), output=args.out, runner=TIMED_RUNNER)
    _, result = scale_stages.host_beam(cfg, args.out, "bench")
    records = read_counters(result).values.get("ingest.records", 0)
    print(f"{records:,} input records; pickled between stages, by type:")
    for name, n in COUNTS.most_common():
        print(f"  {name}: {n:,} ({n / max(records, 1):.2f} per input record)")
    return 0


if __name__ == "__main__":
    sys.exit(run_reported(main))
