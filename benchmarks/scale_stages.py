"""The host-only stages of curate, two ways: on Beam (the pipeline cut before the sandbox) and
as the plain functions the stages call, outside Beam, on the same records.

The Beam way wires ``Ingest -> Validate -> ExactDedup -> NearDedup -> Decontaminate -> Write``
exactly as ``pipeline.curate.build`` does; every record is written once (the rejected ones as their
rejection rows, the survivors as rows of the same schema with the benchmark-only reason
``bench.host_survivor``, since the kept-task schema needs the sandbox stages' results).
The plain way runs the same functions per stage in one process: parsing and schema checks,
the exact-dedup grouping, the vectorised near-dedup functions (``benchmarks.dedup.ours``,
which the DoFns call in batches), the contamination index and one Parquet write. Its
near-dedup clusters keep the smallest (file, line, id), as the pipeline does.
"""

from __future__ import annotations

import os
import pickle
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam import pvalue

from benchmarks.dedup import expected_drops, ours
from tasksieve.pipeline.curate.config import CurateConfig
from tasksieve.pipeline.curate.counters import read_counters
from tasksieve.pipeline.curate.run import pipeline_options
from tasksieve.schemas.arrow import REJECTED_SCHEMA
from tasksieve.schemas.validation import validate_record
from tasksieve.transforms.algorithms.textsim import shingle_hashes_flat
from tasksieve.transforms.decontam.stage import Decontaminate, build_index
from tasksieve.transforms.dedup.exact import ExactDedup, decide_group, prompt_key
from tasksieve.transforms.dedup.near import NearDedup
from tasksieve.transforms.ingest.files import expand_inputs
from tasksieve.transforms.ingest.readers import iter_source_records
from tasksieve.transforms.ingest.records import SourceRecord
from tasksieve.transforms.ingest.stage import Ingest
from tasksieve.transforms.ingest.validate import Validate
from tasksieve.transforms.runtime.common import REJECTED
from tasksieve.transforms.runtime.items import Item, canonical_json, rejection, sha256_text
from tasksieve.transforms.write import Write

HOST_STAGES = ("Ingest", "Validate", "ExactDedup", "NearDedup", "Decontaminate", "Write")
SURVIVOR = "bench.host_survivor"


def survivor_row(item: Item, run_id: str) -> dict[str, Any]:
    """A host-stage survivor as a row of the rejected schema (the whole input record kept)."""
    return rejection(stage="bench", reason=SURVIVOR, detail="", run_id=run_id, item=item)


def host_beam(cfg: CurateConfig, root: str, run_id: str) -> tuple[beam.Pipeline, Any]:
    """Build and run the host-only pipeline; returns the pipeline and its finished result."""
    p = beam.Pipeline(options=pipeline_options(cfg))
    records = p | "Ingest" >> Ingest(cfg.inputs)
    valid = records | "Validate" >> Validate(run_id)
    exact = valid["ok"] | "ExactDedup" >> ExactDedup(run_id)
    near = exact["ok"] | "NearDedup" >> NearDedup(cfg.dedup, run_id)
    clean = near["ok"] | "Decontaminate" >> Decontaminate(cfg.decontam, run_id)
    rows = (
        valid[REJECTED],
        exact[REJECTED],
        near[REJECTED],
        clean[REJECTED],
        clean["ok"] | "WriteSurvivors" >> beam.Map(survivor_row, run_id),
    ) | "AllRows" >> beam.Flatten()
    empty = p | "NoRows" >> beam.Create([])
    _ = {"tasks": empty, "rejected": rows, "rollouts": empty} | "Write" >> Write(
        root, cfg.fingerprint(), run_id
    )
    result = p.run()
    result.wait_until_finish()
    return p, result


def beam_reasons(result: Any) -> dict[str, int]:
    """Rejections per reason, from the run's counters."""
    return {
        k.removeprefix("rejected."): v
        for k, v in read_counters(result).values.items()
        if k.startswith("rejected.")
    }


def _split(out: list[Any]) -> tuple[list[Item], list[dict[str, Any]]]:
    kept = [x for x in out if not isinstance(x, pvalue.TaggedOutput)]
    return kept, [x.value for x in out if isinstance(x, pvalue.TaggedOutput)]


def _validate(records: list[SourceRecord], run_id: str) -> tuple[list[Item], list[Any]]:
    rows: list[dict[str, Any]] = []
    first: dict[str, Item] = {}
    for rec in records:
        f = rec.source_file
        task = None if rec.data is None else validate_record(f, rec.line, rec.data)[0]
        if task is None:
            why = "validate.parse_error" if rec.data is None else "validate.schema"
            rows.append(
                rejection(stage="validate", reason=why, detail="", run_id=run_id, raw=rec.raw)
            )
            continue
        item = Item(task, f, rec.line, sha256_text(canonical_json(rec.data)), raw=rec.raw)
        if item.id in first:
            why = "validate.duplicate_id"
            rows.append(rejection(stage="validate", reason=why, detail="", run_id=run_id))
            continue
        first[item.id] = item
    return list(first.values()), rows


def _exact(items: list[Item], run_id: str) -> tuple[list[Item], list[dict[str, Any]]]:
    groups: dict[str, list[Item]] = {}
    for it in items:
        groups.setdefault(prompt_key(it), []).append(it)
    return _split([x for g in groups.values() for x in decide_group(g, run_id)])


def _near(items: list[Item], cfg: CurateConfig, run_id: str) -> tuple[list[Item], list[Any]]:
    items = sorted(items, key=lambda it: it.order_key)
    d = cfg.dedup
    pairs = ours([it.task.prompt for it in items], d.shingle(), d.num_perm, d.near_threshold)
    drops = expected_drops(len(items), pairs)
    rows = [
        rejection(stage="near_dedup", reason="dedup.near", detail="", run_id=run_id, item=it)
        for i, it in enumerate(items)
        if i in drops
    ]
    return [it for i, it in enumerate(items) if i not in drops], rows


def _decontam(items: list[Item], cfg: CurateConfig, run_id: str) -> tuple[list[Item], list[Any]]:
    index = build_index(cfg.decontam)
    kept, rows = [], []
    for it in items:
        found = index.check(it.task.prompt)
        if found:
            reason = f"decontam.{found[0].source}"
            rows.append(
                rejection(stage="decontaminate", reason=reason, detail="", run_id=run_id, item=it)
            )
        else:
            kept.append(it)
    return kept, rows


def host_plain(cfg: CurateConfig, root: str, run_id: str) -> dict[str, Any]:
    """Run the plain functions stage by stage; seconds per stage, reasons and record sizes."""
    secs: dict[str, float] = {}

    def timed(stage: str, fn: Callable[[], Any]) -> Any:
        t0 = time.perf_counter()
        out = fn()
        secs[stage] = time.perf_counter() - t0
        return out

    records = timed(
        "Ingest", lambda: [r for f in expand_inputs(cfg.inputs) for r in iter_source_records(f)]
    )
    items, rows = timed("Validate", lambda: _validate(records, run_id))
    items, more = timed("ExactDedup", lambda: _exact(items, run_id))
    rows += more
    items, more = timed("NearDedup", lambda: _near(items, cfg, run_id))
    rows += more
    items, more = timed("Decontaminate", lambda: _decontam(items, cfg, run_id))
    rows += more
    all_rows = rows + [survivor_row(it, run_id) for it in items]
    os.makedirs(root, exist_ok=True)
    timed(
        "Write",
        lambda: pq.write_table(
            pa.Table.from_pylist(all_rows, schema=REJECTED_SCHEMA),
            os.path.join(root, "rows.parquet"),
            compression="zstd",
        ),
    )
    return {
        "records": len(records),
        "stage_s": secs,
        "reasons": dict(Counter(r["reason"] for r in rows)),
        "survivors": len(items),
        "sizes": record_sizes(records[:2000], items[:2000], cfg),
    }


def record_sizes(records: list[Any], items: list[Item], cfg: CurateConfig) -> dict[str, float]:
    """Mean pickled bytes of what the shuffles move per record, and of the near-dup index."""
    if not items:
        return {}
    _, counts = shingle_hashes_flat([it.task.prompt for it in items], cfg.dedup.shingle())
    return {
        "source_record": float(np.mean([len(pickle.dumps(r)) for r in records])),
        "item": float(np.mean([len(pickle.dumps(it)) for it in items])),
        "shingles": float(np.mean(counts)) * 8,
        "signature": 4.0 * cfg.dedup.num_perm,
        "bands": float(cfg.dedup.banding().bands),
    }
