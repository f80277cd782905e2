"""Gather what the run report shows from a curate output directory (no rendering here).

Everything is aggregated while reading: counts per stage, family and reason, pass rates
(one float per scored task), verdict counts, and a bounded sample of rollouts, so a run of
many thousands of tasks costs memory for its pass rates only and the page stays small.
Rollouts are streamed in batches; only the sampled rows keep their text.

This module trusts nothing in the shards to be well-formed text: it reads values as they are
and leaves escaping to the HTML layer. It does NOT check the run's conservation (``run.py``
does that before publishing); a mismatch between the manifest and the shards is reported on
the page, not raised.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from tasksieve.pipeline.outputs.layout import RunLayout
from tasksieve.pipeline.outputs.report.checks import Checks, load_checks
from tasksieve.schemas import Manifest
from tasksieve.transforms.algorithms.stats import histogram_bin
from tasksieve.transforms.reasons import STAGES

_PREFIX_STAGE = {
    "ingest": "ingest",
    "validate": "validate",
    "dedup.exact": "exact_dedup",
    "dedup.conflict": "exact_dedup",
    "dedup.near": "near_dedup",
    "dedup.index": "near_dedup",
    "decontam": "decontaminate",
    "verifier": "gates",
    "gate.weak_tests": "test_strength",
    "gate": "gates",
    "rollouts": "rollouts",
    "verify": "verify",
    "filter.ambiguous": "ambiguity",
    "filter": "filter",
}
HIST_LABELS = ("0", "(0.0,0.2]", "(0.2,0.4]", "(0.4,0.6]", "(0.6,0.8]", "(0.8,1.0]", "1")
STATUSES = ("pass", "fail", "timeout", "error", "infra_error")
NO_FAMILY = "(unparsed)"
OTHER_FAMILIES = "(other families)"
MAX_FAMILIES = 24  # rows of the per-family tables; the rest are summed into one row
PROMPT_CHARS = 600
COMPLETION_CHARS = 1200
DETAIL_CHARS = 300


@dataclass(frozen=True)
class FunnelStep:
    """One stage of the funnel: how many records reached it, and what it rejected, by reason."""

    stage: str
    entered: int
    reasons: dict[str, int]

    @property
    def rejected(self) -> int:
        return sum(self.reasons.values())

    @property
    def left(self) -> int:
        return self.entered - self.rejected


@dataclass
class FamilyRates:
    """Pass rates of one family's scored tasks, kept and filtered apart."""

    kept: list[float] = field(default_factory=list)
    filtered: list[float] = field(default_factory=list)

    def histogram(self) -> dict[str, int]:
        """Counts per manifest histogram label (kept + filtered), every label present."""
        counts = Counter(histogram_bin(r) for r in [*self.kept, *self.filtered])
        return {label: counts.get(label, 0) for label in HIST_LABELS}


@dataclass(frozen=True)
class Sample:
    """One rollout shown on the page, with excerpts (already cut) of its texts."""

    family: str
    task_id: str
    sample_index: int
    status: str
    tests: str
    detail: str
    completion: str
    prompt: str


@dataclass
class ReportData:
    manifest: Manifest
    funnel: list[FunnelStep]
    kept_by_family: dict[str, int]
    rejected_by_family: dict[str, dict[str, int]]  # family -> stage -> count
    rates: dict[str, FamilyRates]
    verdicts: dict[str, dict[str, int]]  # family -> status -> count
    samples: list[Sample]
    checks: Checks | None
    problems: list[str]  # disagreements between the manifest and the shards


def excerpt(text: Any, limit: int) -> str:
    """``text`` as a string cut to ``limit`` characters, saying how much was cut."""
    s = "" if text is None else str(text)
    if len(s) <= limit:
        return s
    return f"{s[:limit]}\n… ({len(s) - limit} more characters)"


def stage_of(reason: str, seen: dict[str, str]) -> str:
    """The stage that rejects ``reason``: as recorded in rejected/, else by its prefix."""
    if reason in seen:
        return seen[reason]
    for prefix, stage in _PREFIX_STAGE.items():
        if reason == prefix or reason.startswith(prefix + "."):
            return stage
    return "other"


def build_funnel(manifest: Manifest, seen: dict[str, str]) -> list[FunnelStep]:
    """Input -> kept, one step per stage that exists in pipeline order, from the manifest."""
    by_stage: dict[str, dict[str, int]] = {}
    for reason, n in sorted(manifest.rejected_by_reason.items()):
        by_stage.setdefault(stage_of(reason, seen), {})[reason] = n
    order = [*STAGES, *sorted(s for s in by_stage if s not in STAGES)]
    steps: list[FunnelStep] = []
    remaining = manifest.counts.get("input", 0)
    for stage in order:
        step = FunnelStep(stage, remaining, by_stage.get(stage, {}))
        steps.append(step)
        remaining = step.left
    return steps


def _family(value: Any) -> str:
    return NO_FAMILY if value is None or value == "" else str(value)


def _cap_families(table: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    """At most MAX_FAMILIES rows (largest first); the others summed into one row."""
    order = sorted(table, key=lambda f: (-sum(table[f].values()), f))
    out = {f: table[f] for f in order[:MAX_FAMILIES]}
    rest: Counter[str] = Counter()
    for f in order[MAX_FAMILIES:]:
        rest.update(table[f])
    if rest:
        out[OTHER_FAMILIES] = dict(rest)
    return out


def read_rejected(
    files: list[Path], rates: dict[str, FamilyRates]
) -> tuple[dict[str, dict[str, int]], dict[str, str]]:
    """Rejections per family and stage, the stage of each reason; adds filtered pass rates."""
    per_family: dict[str, Counter[str]] = {}
    seen: dict[str, str] = {}
    for f in files:
        cols = ["family", "stage", "reason", "pass_rate"]
        for batch in pq.ParquetFile(f).iter_batches(columns=cols, batch_size=65536):
            rows = zip(*(batch.column(c).to_pylist() for c in cols), strict=True)
            for family, stage, reason, rate in rows:
                fam = _family(family)
                stage = str(stage or "other")
                seen.setdefault(str(reason), stage)
                per_family.setdefault(fam, Counter())[stage] += 1
                if rate is not None:
                    rates.setdefault(fam, FamilyRates()).filtered.append(float(rate))
    return _cap_families({f: dict(c) for f, c in per_family.items()}), seen


def read_kept(files: list[Path], rates: dict[str, FamilyRates]) -> dict[str, int]:
    """Kept tasks per family; adds their pass rates."""
    kept: Counter[str] = Counter()
    for f in files:
        table = pq.read_table(f, columns=["family", "pass_rate"])
        for family, rate in zip(
            table.column("family").to_pylist(), table.column("pass_rate").to_pylist(), strict=True
        ):
            fam = _family(family)
            kept[fam] += 1
            if rate is not None:
                rates.setdefault(fam, FamilyRates()).kept.append(float(rate))
    return dict(sorted(kept.items()))


def _round_robin(by_status: dict[str, list[dict[str, Any]]], n: int) -> list[dict[str, Any]]:
    """Up to ``n`` rollouts, taken a status at a time (pass, fail, ...): first a new status of
    a task not shown yet, then a new status, then a task not shown yet, then any."""
    order = sorted(by_status, key=lambda s: (STATUSES.index(s) if s in STATUSES else 99, s))
    queues = [list(by_status[s]) for s in order]
    out: list[dict[str, Any]] = []
    tasks: set[str] = set()
    statuses: set[str] = set()
    preferences = (
        lambda r: r["task_id"] not in tasks and r["status"] not in statuses,
        lambda r: r["status"] not in statuses,
        lambda r: r["task_id"] not in tasks,
        lambda r: True,
    )
    for wanted in preferences:
        progress = True
        while progress and len(out) < n:
            progress = False
            for q in queues:
                row = next((r for r in q if wanted(r)), None)
                if row is not None and len(out) < n:
                    q.remove(row)
                    out.append(row)
                    tasks.add(row["task_id"])
                    statuses.add(row["status"])
                    progress = True
    return out


def read_rollouts(
    files: list[Path], per_family: int
) -> tuple[dict[str, dict[str, int]], dict[str, list[dict[str, Any]]]]:
    """Verdict counts per family and status, and up to ``per_family`` rollouts per family."""
    counts: dict[str, Counter[str]] = {}
    # family -> status -> up to per_family rollouts of different tasks
    chosen: dict[str, dict[str, list[dict[str, Any]]]] = {}
    cols = [
        "task_id",
        "family",
        "sample_index",
        "completion",
        "verdict.status",
        "verdict.detail",
        "verdict.tests_passed",
        "verdict.tests_total",
    ]
    for f in files:
        for batch in pq.ParquetFile(f).iter_batches(columns=cols, batch_size=4096):
            data = batch.to_pydict()
            verdicts = data["verdict"]
            for i, family in enumerate(data["family"]):
                fam = _family(family)
                verdict = verdicts[i] or {}
                status = str(verdict.get("status") or "unknown")
                counts.setdefault(fam, Counter())[status] += 1
                picked = chosen.setdefault(fam, {})
                if len(picked) < len(STATUSES) + 2 or status in picked:
                    picked.setdefault(status, [])
                tid = str(data["task_id"][i] or "")
                rows = picked.get(status)
                if (
                    rows is not None
                    and len(rows) < per_family
                    and tid not in {r["task_id"] for r in rows}
                ):
                    rows.append(
                        {
                            "task_id": tid,
                            "sample_index": int(data["sample_index"][i] or 0),
                            "completion": excerpt(data["completion"][i], COMPLETION_CHARS),
                            "status": status,
                            "detail": excerpt(verdict.get("detail"), DETAIL_CHARS),
                            "tests": f"{verdict.get('tests_passed')}/{verdict.get('tests_total')}",
                        }
                    )
    capped = _cap_families({f: dict(c) for f, c in counts.items()})
    families = sorted(chosen)[:MAX_FAMILIES]
    return capped, {f: _round_robin(chosen[f], per_family) for f in families}


def _prompt_from_raw(raw: Any) -> str | None:
    try:
        record = json.loads(raw)
    except (TypeError, ValueError):
        return None
    prompt = record.get("prompt") if isinstance(record, dict) else None
    return prompt if isinstance(prompt, str) else None


def find_prompts(run: RunLayout, ids: set[str]) -> dict[str, str]:
    """The prompts of ``ids``: from the kept tasks, else from the rejected rows' raw input."""
    found: dict[str, str] = {}
    if not ids:
        return found
    for f in run.shards("tasks"):
        t = pq.read_table(f, columns=["id", "prompt"], filters=[("id", "in", sorted(ids))])
        for i, p in zip(t.column("id").to_pylist(), t.column("prompt").to_pylist(), strict=True):
            found.setdefault(i, str(p or ""))
    missing = sorted(ids - set(found))
    for f in run.shards("rejected") if missing else []:
        t = pq.read_table(f, columns=["record_id", "raw"], filters=[("record_id", "in", missing)])
        for i, raw in zip(
            t.column("record_id").to_pylist(), t.column("raw").to_pylist(), strict=True
        ):
            prompt = _prompt_from_raw(raw)
            if prompt is not None:
                found.setdefault(i, prompt)
    return found


def consistency(
    manifest: Manifest, funnel: list[FunnelStep], kept: dict[str, int], rejected: int
) -> list[str]:
    """Where the manifest and the shards disagree (empty for a run that published)."""
    c = manifest.counts
    problems = []
    if funnel and funnel[-1].left != c.get("kept", 0):
        problems.append(f"funnel ends at {funnel[-1].left}, manifest kept {c.get('kept', 0)}")
    if sum(kept.values()) != c.get("kept", 0):
        problems.append(f"tasks/ holds {sum(kept.values())} rows, manifest kept {c.get('kept')}")
    if rejected != c.get("rejected", 0):
        problems.append(f"rejected/ holds {rejected} rows, manifest rejected {c.get('rejected')}")
    return problems


def gather(out: Path, per_family: int = 4) -> ReportData:
    """Everything the report shows, read from the output directory ``out`` (a run, or a
    root of runs: then its current run); ``NotAnOutput`` when it is neither."""
    run = RunLayout.find(out)
    manifest = run.manifest
    rates: dict[str, FamilyRates] = {}
    rejected_by_family, seen = read_rejected(run.shards("rejected"), rates)
    kept = read_kept(run.shards("tasks"), rates)
    verdicts, picked = read_rollouts(run.shards("rollouts"), per_family)
    prompts = find_prompts(run, {p["task_id"] for ps in picked.values() for p in ps})
    samples = [
        Sample(
            family=fam,
            prompt=excerpt(
                prompts.get(p["task_id"], "(prompt not found in the shards)"), PROMPT_CHARS
            ),
            **p,
        )
        for fam, ps in picked.items()
        for p in ps
    ]
    funnel = build_funnel(manifest, seen)
    n_rejected = sum(sum(s.values()) for s in rejected_by_family.values())
    return ReportData(
        manifest=manifest,
        funnel=funnel,
        kept_by_family=kept,
        rejected_by_family=rejected_by_family,
        rates=dict(sorted(rates.items())),
        verdicts=verdicts,
        samples=samples,
        checks=load_checks(run.run_dir),
        problems=consistency(manifest, funnel, kept, n_rejected),
    )
