"""Run an eval: the pipeline in a staging directory, then scores, summary, catalog, publish.

The layout of an eval output (published whole, like curate's: ``pipeline.outputs.staging``):

- ``rollouts/`` every attempt with its verdict and reward (curate's rollout schema);
- ``rejected/`` tasks that could not be scored, with the reason (curate's schema);
- ``trajectories/`` agent runs only: one row per step (curate's trajectory schema);
- ``meta/`` every task that entered (id, family, source, tags, curated pass rate);
- ``scores/`` one row per scored task (``pipeline.eval.scores``);
- ``summary.json`` the aggregates (``pipeline.eval.summary``);
- ``manifest.json`` with ``"kind": "eval"``; ``catalog.duckdb`` (``pipeline.eval.catalog``);
- ``report.html`` the summary as a page (``pipeline.eval.html``).

Conservation: every task that entered is scored or rejected, never both; otherwise the run
fails as an internal error and nothing is published.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq

from tasksieve.pipeline.curate.counters import ConservationError, read_counters, read_sandboxes
from tasksieve.pipeline.curate.run import new_run_id, package_versions, runner_options
from tasksieve.pipeline.eval.agent_scores import endings, step_costs
from tasksieve.pipeline.eval.build import build
from tasksieve.pipeline.eval.catalog import write_catalog
from tasksieve.pipeline.eval.config import EvalConfig
from tasksieve.pipeline.eval.html import write_report
from tasksieve.pipeline.eval.inputs import read_input
from tasksieve.pipeline.eval.scores import COMPONENTS, FAILURE_KINDS, task_scores
from tasksieve.pipeline.eval.summary import summarise
from tasksieve.pipeline.outputs.staging import target_for
from tasksieve.schemas import SCHEMA_VERSION
from tasksieve.transforms.runtime import fsio
from tasksieve.transforms.samplers import model_id

log = logging.getLogger("tasksieve")
KIND = "eval"
SUMMARY = "summary.json"


@dataclass(frozen=True)
class EvalResult:
    output: Path | str
    manifest: dict[str, Any]
    summary: dict[str, Any]


def scores_schema(ks: tuple[int, ...]) -> pa.Schema:
    """The Arrow schema of ``scores/`` for the run's ks."""
    f64, i64 = pa.float64(), pa.int64()
    fields = [
        pa.field("task_id", pa.string(), nullable=False),
        pa.field("family", pa.string(), nullable=False),
        pa.field("source", pa.string(), nullable=False),
        pa.field("bucket", pa.string(), nullable=False),
        pa.field("curated_pass_rate", f64),
        pa.field("model_id", pa.string()),
        pa.field("n", i64, nullable=False),
        pa.field("c", i64, nullable=False),
        pa.field("attempts", i64, nullable=False),
        pa.field("c_by_turn", pa.list_(i64)),
        *[pa.field(f"pass_at_{k}", f64) for k in ks],
        *[pa.field(f"fail_{kind}", i64) for kind in FAILURE_KINDS],
        pa.field("completion_tokens", i64),
        pa.field("prompt_tokens", i64),
        pa.field("sandbox_s", f64),
        pa.field("sandbox_cpu_s", f64),
        pa.field("cpu_measured", i64, nullable=False),
        pa.field("reward", f64),
        *[pa.field(f"reward_{name}", f64) for name in COMPONENTS],
    ]
    return pa.schema(fields, metadata={b"schema_version": SCHEMA_VERSION.encode()})


def _rows(root: Path, kind: str, columns: list[str] | None = None) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for f in sorted((root / kind).rglob("*.parquet")):
        rows.extend(pq.read_table(f, columns=columns).to_pylist())
    return rows


def _count(root: Path, kind: str) -> int:
    return sum(pq.read_metadata(f).num_rows for f in (root / kind).rglob("*.parquet"))


def evaluate(cfg: EvalConfig) -> EvalResult:
    """Run the eval of ``cfg`` and publish it; returns where it went, its manifest and summary."""
    given = read_input(cfg.inputs)
    options = runner_options(cfg.runner, cfg.beam_args)
    fsio.configure(options)
    run_id = new_run_id()
    started = dt.datetime.now(dt.UTC).isoformat()
    target = target_for(cfg.output, run_id)
    target.check(cfg.overwrite)
    target.begin()
    started_pipeline = False
    try:
        sandbox = cfg.sandbox.make()
        sandbox_info = dict(sandbox.describe())
        sandbox.close()
        p = beam.Pipeline(options=options)
        build(p, cfg, target.shards_root, run_id, given.items, given.pass_rates)
        started_pipeline = True
        result = p.run()
        result.wait_until_finish()
        staging = target.local_dir()
        counters = read_counters(result)
        n_in = (
            len(given.items)
            if given.items is not None
            else counters.values.get("ingest.records", 0)
        )
        rejected = _rows(staging, "rejected", ["record_id", "reason"])
        rejected_ids = {str(r["record_id"]) for r in rejected if r["record_id"]}
        rollouts = _rows(staging, "rollouts")
        agent = cfg.agent is not None
        turns = cfg.episodes.turns
        steps: dict[str, tuple[float, float | None]] | None = None
        if agent:  # success by step up to the longest episode
            turns = max([int(r["turn"]) for r in rollouts], default=1)
            steps = step_costs(_rows(staging, "trajectories", ["task_id", "duration_s", "cpu_s"]))
        scores = task_scores(
            rollouts, _rows(staging, "meta"), rejected_ids, cfg.ks, turns, agent, steps
        )
        if n_in != len(scores) + len(rejected):
            raise ConservationError(
                f"input {n_in} tasks != scored {len(scores)} + rejected {len(rejected)}"
            )
        (staging / "scores").mkdir(exist_ok=True)
        table = pa.Table.from_pylist(scores, schema=scores_schema(cfg.ks))
        pq.write_table(
            table, staging / "scores" / "part-00000-of-00001.parquet", compression="zstd"
        )
        summary = summarise(scores, cfg.ks, cfg.resamples)
        if agent:
            summary["agent"] = {
                "success_by": "step",
                "episodes": len(rollouts),
                "endings": endings(rollouts),
            }
        (staging / SUMMARY).write_text(json.dumps(summary, indent=2) + "\n")
        reasons: dict[str, int] = {}
        for r in rejected:
            reasons[r["reason"]] = reasons.get(r["reason"], 0) + 1
        manifest = {
            "kind": KIND,
            "schema_version": SCHEMA_VERSION,
            "run_id": run_id,
            "created_at": started,
            "finished_at": dt.datetime.now(dt.UTC).isoformat(),
            "config": cfg.as_dict(),
            "config_fingerprint": cfg.fingerprint(),
            "packages": package_versions(),
            "model_id": model_id(cfg.sampler),
            "sampler": cfg.sampler.backend,
            "sandbox": {**sandbox_info, "used_by_workers": read_sandboxes(result)},
            "inputs": list(cfg.inputs),
            "curated_input": given.curated,
            "counts": {
                "input": n_in,
                "scored": len(scores),
                "rejected": len(rejected),
                "rollouts": _count(staging, "rollouts"),
                **({"trajectory_steps": _count(staging, "trajectories")} if agent else {}),
            },
            "rejected_by_reason": dict(sorted(reasons.items())),
            "stage_counters": counters.values,
        }
        (staging / "manifest.json").write_text(json.dumps(manifest, indent=2, default=str) + "\n")
        write_catalog(staging)
        write_report(staging, summary, manifest)
    except BaseException as exc:
        if not started_pipeline:  # nothing ran: a bad input or flag, nothing to inspect
            target.discard()
            raise
        kept = target.keep_failed(exc)
        if kept is not None:
            log.error("eval %s failed; its staging is kept for inspection in %s", run_id, kept)
        raise
    for gone in target.clean_failed():
        log.info("removed the staging of an earlier failed eval: %s", gone)
    published = target.publish()
    log.info("eval %s published in %s", run_id, published)
    return EvalResult(target.out, manifest, summary)
