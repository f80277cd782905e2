"""Run the data-quality suites on a curate output; write ``checks.json`` and GX Data Docs.

The Great Expectations context is ephemeral: suites are built from code on every check (see
:mod:`pipeline.outputs.checks.suites`), so there is no project configuration to keep, and nothing
is written anywhere but inside the checked directory: ``OUT/gx/`` (the Data Docs site, a
self-contained static HTML tree; open ``OUT/gx/index.html``) and ``OUT/checks.json``.

``checks.json`` is a stable contract read by other tools::

    {"success": bool,
     "results": [{"suite": str, "expectation": str, "column": str | null, "success": bool,
                  "unexpected_count": int | null, "element_count": int | null,
                  "detail": str}]}

This module does NOT repair anything, and a passing check says only what the suites test.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from tasksieve.pipeline.outputs.layout import RunLayout, UnreadableShard
from tasksieve.pipeline.outputs.report.checks import CHECKS_NAME
from tasksieve.pipeline.outputs.report.checks import CheckRow as CheckItem  # one row of checks.json

KINDS = ("tasks", "rejected", "rollouts")
DOCS_DIR = "gx"
_SITE = "tasksieve"
_CONTAINS = "expect_column_distinct_values_to_contain_set"


@dataclass(frozen=True)
class CheckResult:
    """All outcomes of a check, and where its files went."""

    success: bool
    results: tuple[CheckItem, ...]
    checks_json: Path
    docs_index: Path

    def failures(self) -> list[CheckItem]:
        return [r for r in self.results if not r.success]

    def as_json(self) -> dict[str, Any]:
        return {"success": self.success, "results": [asdict(r) for r in self.results]}


def describe_failures(result: CheckResult) -> str:
    """One sentence naming the failed expectations and how many rows failed each."""
    parts = []
    for f in result.failures():
        where = f"{f.suite}: {f.expectation}" + (f"({f.column})" if f.column else "")
        rows = "" if f.unexpected_count is None else f" on {f.unexpected_count} row(s)"
        parts.append(f"{where}{rows}")
    return f"{len(parts)} expectation(s) failed: " + "; ".join(parts)


def _frame(table: pa.Table) -> pd.DataFrame:
    return table.to_pandas(types_mapper=pd.ArrowDtype)


def _flatten_verdict(table: pa.Table) -> pa.Table:
    """Add ``verdict.<field>`` columns for the scalar fields of the verdict struct."""
    if "verdict" not in table.column_names:
        return table
    col = table.column("verdict")
    if not pa.types.is_struct(col.type):
        return table
    for field in col.type:
        if field.name in ("status", "tests_passed", "tests_total"):
            values = pa.chunked_array([c.field(field.name) for c in col.chunks], type=field.type)
            table = table.append_column(f"verdict.{field.name}", values)
    return table


def load_kind(run: RunLayout, kind: str) -> tuple[list[tuple[str, pa.Schema]], pd.DataFrame]:
    """Each shard's (path, schema), and every row of the kind as one frame."""
    from tasksieve.pipeline.outputs.checks.suites import SCHEMAS

    schemas: list[tuple[str, pa.Schema]] = []
    frames: list[pd.DataFrame] = []
    for f in run.shards(kind):
        try:
            table = pq.read_table(f)
        except (pa.ArrowException, OSError) as exc:
            raise UnreadableShard(f, str(exc)) from exc
        schemas.append((str(f.relative_to(run.run_dir)), table.schema))
        if kind == "rollouts":
            table = _flatten_verdict(table)
        frames.append(_frame(table))
    if not frames:  # no shard at all: check an empty frame of the documented schema
        empty = SCHEMAS[kind].empty_table()
        frames.append(_frame(_flatten_verdict(empty) if kind == "rollouts" else empty))
    non_empty = [f for f in frames if len(f)] or frames[:1]
    return schemas, pd.concat(non_empty, ignore_index=True) if len(non_empty) > 1 else non_empty[0]


def _column(frame: pd.DataFrame, name: str) -> list[Any]:
    return frame[name].tolist() if name in frame.columns else []


def per_task_frame(tasks: pd.DataFrame, rejected: pd.DataFrame, rollouts: pd.DataFrame) -> Any:
    """One row per scored task or rollout-referenced id: its ``n`` and its turn-1 rollouts."""
    n_of: dict[str, Any] = {}
    for ids, ns in (
        (_column(tasks, "id"), _column(tasks, "n")),
        (_column(rejected, "record_id"), _column(rejected, "n")),
    ):
        for i, n in zip(ids, ns, strict=False):
            if isinstance(n, int) and not isinstance(n, bool):  # else: the schema suite says
                n_of[str(i)] = n
    turns = _column(rollouts, "turn") or [1] * len(rollouts)
    counts = Counter(  # first attempts: later turns of an episode share its sample_index
        str(t) for t, turn in zip(_column(rollouts, "task_id"), turns, strict=False) if turn == 1
    )
    ids = sorted(set(n_of) | set(counts))
    return pd.DataFrame(
        {
            "task_id": pd.array(ids, dtype="string"),
            "n": pd.array([n_of.get(i) for i in ids], dtype="Int64"),
            "rollouts": pd.array([counts.get(i, 0) for i in ids], dtype="Int64"),
        }
    )


@contextmanager
def _quiet() -> Iterator[None]:
    """Silence GX's loggers while checking (progress bars are off in the context)."""
    logger = logging.getLogger("great_expectations")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _detail(cfg: Any, res: dict[str, Any], exc: dict[str, Any] | None, label: str) -> str:
    parts = [p for p in (label, (cfg.meta or {}).get("guards", "")) if p]
    errors = [exc, *(v for v in (exc or {}).values() if isinstance(v, dict))]
    for e in errors:
        if e and e.get("raised_exception"):
            message = str(e.get("exception_message") or "").splitlines()[:1]
            parts.append(f"could not evaluate: {' '.join(message)}".strip())
            break
    if cfg.type == _CONTAINS and res.get("missing_count"):
        parts.append(f"missing: {[str(v) for v in res.get('partial_missing_list', [])]}")
    elif res.get("observed_value") is not None:
        parts.append(f"observed {res['observed_value']}")
        if "value" in cfg.kwargs:
            parts.append(f"expected {cfg.kwargs['value']}")
    sample = res.get("partial_unexpected_list")
    if res.get("unexpected_count") and sample:
        parts.append(f"e.g. {[str(v) for v in sample[:5]]}")
    return "; ".join(parts)


def _items(suite: str, label: str, validation: Any) -> list[CheckItem]:
    out: list[CheckItem] = []
    for r in validation.results:
        cfg = r.expectation_config
        kw = cfg.kwargs
        column = kw.get("column")
        if column is None and "column_A" in kw:
            column = f"{kw['column_A']},{kw['column_B']}"
        if column is None and "column_list" in kw:
            column = ",".join(kw["column_list"])
        res = dict(r.result or {})
        unexpected, elements = res.get("unexpected_count"), res.get("element_count")
        if cfg.type == _CONTAINS:  # its missing_count counts expected values not found
            unexpected, elements = res.get("missing_count"), len(kw["value_set"])
        out.append(
            CheckItem(
                suite=suite,
                expectation=cfg.type,
                column=column,
                success=bool(r.success),
                unexpected_count=None if unexpected is None else int(unexpected),
                element_count=None if elements is None else int(elements),
                detail=_detail(cfg, res, dict(r.exception_info or {}), label),
            )
        )
    return out


class _Runner:
    """An ephemeral GX context with one pandas data source and a Data Docs site in OUT/gx."""

    def __init__(self, docs_dir: Path) -> None:
        import great_expectations as gx
        from great_expectations.data_context.types.base import (
            DataContextConfig,
            InMemoryStoreBackendDefaults,
            ProgressBarsConfig,
        )

        self.gx = gx
        site = {
            "class_name": "SiteBuilder",
            "store_backend": {
                "class_name": "TupleFilesystemStoreBackend",
                "base_directory": str(docs_dir),
            },
            "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
        }
        config = DataContextConfig(
            store_backend_defaults=InMemoryStoreBackendDefaults(init_temp_docs_sites=False),
            data_docs_sites={_SITE: site},  # the only site: nothing is written elsewhere
            analytics_enabled=False,
            progress_bars=ProgressBarsConfig(globally=False),
        )
        self.ctx = gx.get_context(mode="ephemeral", project_config=config)
        self.source = self.ctx.data_sources.add_pandas("tasksieve")
        self.suites: dict[str, Any] = {}
        self.runs = 0

    def run(self, suite: Any, frame: pd.DataFrame, label: str = "") -> list[CheckItem]:
        if suite.name not in self.suites:
            self.suites[suite.name] = self.ctx.suites.add(suite)
        self.runs += 1
        name = f"{self.runs:04d}-{suite.name}"
        if label:  # a shard: name it in the Data Docs
            name += "-" + label.removesuffix(".parquet").replace("/", "_")
        batch = self.source.add_dataframe_asset(name).add_batch_definition_whole_dataframe("all")
        vd = self.ctx.validation_definitions.add(
            self.gx.ValidationDefinition(name=name, data=batch, suite=self.suites[suite.name])
        )
        checkpoint = self.ctx.checkpoints.add(
            self.gx.Checkpoint(name=name, validation_definitions=[vd])
        )
        result = checkpoint.run(batch_parameters={"dataframe": frame})
        items: list[CheckItem] = []
        for validation in result.run_results.values():
            items.extend(_items(suite.name, label, validation))
        return items

    def build_docs(self) -> None:
        self.ctx.build_data_docs(site_names=[_SITE])


def _facts(manifest: dict[str, Any], tasks: pd.DataFrame, rejected: pd.DataFrame) -> Any:
    from tasksieve.pipeline.outputs.checks.suites import RunFacts

    counts = manifest["counts"]
    band = (manifest.get("config") or {}).get("band") or {}
    ids = {str(i) for i in _column(tasks, "id") + _column(rejected, "record_id") if i is not None}
    return RunFacts(
        kept=int(counts.get("kept", -1)),
        rejected=int(counts.get("rejected", -1)),
        rollouts=int(counts.get("rollouts", -1)),
        too_hard=float(band.get("too_hard", 0.0)),
        too_easy=float(band.get("too_easy", 1.0)),
        task_ids=frozenset(ids),
    )


def check_output(out_dir: Path) -> CheckResult:
    """Run every suite on ``out_dir``; write ``checks.json`` and the Data Docs into it.

    ``out_dir`` is a run, or a root of runs (then its current run is checked); anything else
    raises ``NotAnOutput``.
    """
    from tasksieve.pipeline.outputs.checks import suites

    run = RunLayout.find(Path(out_dir).absolute())  # GX wants an absolute Data Docs directory
    out_dir, manifest = run.run_dir, run.raw
    if not isinstance(manifest.get("counts"), dict):
        raise run.refuse("not a tasksieve manifest (no counts)")
    loaded = {kind: load_kind(run, kind) for kind in KINDS}
    frames = {kind: loaded[kind][1] for kind in KINDS}
    facts = _facts(manifest, frames["tasks"], frames["rejected"])
    docs = out_dir / DOCS_DIR
    shutil.rmtree(docs, ignore_errors=True)
    items: list[CheckItem] = []
    with _quiet():
        runner = _Runner(docs)
        for kind in KINDS:
            suite = suites.schema_suite(kind)
            for path, schema in loaded[kind][0]:
                rows = suites.schema_frame_rows(schema)
                items += runner.run(suite, pd.DataFrame(rows, dtype="string"), path)
        items += runner.run(suites.tasks_suite(facts), frames["tasks"])
        items += runner.run(suites.rejected_suite(facts), frames["rejected"])
        items += runner.run(suites.rollouts_suite(facts), frames["rollouts"])
        per_task = per_task_frame(frames["tasks"], frames["rejected"], frames["rollouts"])
        items += runner.run(suites.per_task_suite(), per_task)
        runner.build_docs()
    result = CheckResult(
        success=all(i.success for i in items),
        results=tuple(items),
        checks_json=out_dir / CHECKS_NAME,
        docs_index=docs / "index.html",
    )
    result.checks_json.write_text(json.dumps(result.as_json(), indent=2) + "\n")
    return result
