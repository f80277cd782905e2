"""Write small curate output directories (manifest + Parquet shards) for the report tests.

The shards use the real Arrow schemas of the records, and the manifest's counts are computed
from the rows written, the way ``pipeline.curate.run`` does, so a test can build a run of any shape
(empty, hostile, large) without running Beam.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from tasksieve.schemas import Manifest
from tasksieve.schemas.arrow import REJECTED_SCHEMA, ROLLOUTS_SCHEMA, TASKS_SCHEMA


def task(tid: str, family: str, k: int, n: int = 4, prompt: str | None = None) -> dict[str, Any]:
    return {
        "id": tid,
        "family": family,
        "prompt": prompt if prompt is not None else f"Solve {tid}.",
        "n": n,
        "k": k,
        "n_requested": n,
        "pass_rate": k / n,
    }


def rejected(
    rid: str | None,
    family: str | None,
    stage: str,
    reason: str,
    k: int | None = None,
    n: int = 4,
    prompt: str = "",
) -> dict[str, Any]:
    return {
        "record_id": rid,
        "family": family,
        "stage": stage,
        "reason": reason,
        "detail": f"{reason} detail",
        "raw": json.dumps({"id": rid, "family": family, "prompt": prompt or f"Prompt of {rid}."}),
        "n": None if k is None else n,
        "k": k,
        "pass_rate": None if k is None else k / n,
    }


def rollout(
    tid: str, family: str, i: int, status: str, completion: str = "", detail: str = ""
) -> dict[str, Any]:
    return {
        "task_id": tid,
        "family": family,
        "sample_index": i,
        "model_id": "test-model",
        "sampler": "replay",
        "completion": completion or f"def f():\n    return {i}\n",
        "solution": "",
        "verdict": {
            "status": status,
            "tests_passed": 1 if status == "pass" else 0,
            "tests_total": 1,
            "detail": detail or f"{status} detail",
            "checks": [],
            "duration_s": 0.01,
            "limit_hit": None,
            "trace": [],
        },
    }


def _write(path: Path, rows: list[dict[str, Any]], schema: pa.Schema) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)


def _bin(rate: float) -> str:
    if rate == 0:
        return "0"
    if rate == 1:
        return "1"
    upper = min(5, -int(-rate // 0.2))
    return f"({(upper - 1) / 5:.1f},{upper / 5:.1f}]"


def make_run(
    out: Path,
    tasks: list[dict[str, Any]],
    rejects: list[dict[str, Any]],
    rollouts: list[dict[str, Any]],
    families: tuple[str, ...] = ("code", "sql"),
    band: tuple[float, float] = (0.0, 1.0),
) -> Path:
    """Write a finished-looking curate output into ``out`` and return it."""
    for fam in families:  # one shard per family, empty ones too, as the writer does
        rows = [t for t in tasks if t["family"] == fam]
        _write(out / "tasks" / fam / "part-00000-of-00001.parquet", rows, TASKS_SCHEMA)
    _write(out / "rejected" / "part-00000-of-00001.parquet", rejects, REJECTED_SCHEMA)
    _write(out / "rollouts" / "part-00000-of-00001.parquet", rollouts, ROLLOUTS_SCHEMA)
    reasons = Counter(r["reason"] for r in rejects)
    rates = [t["pass_rate"] for t in tasks] + [
        r["pass_rate"] for r in rejects if r["k"] is not None
    ]
    manifest = Manifest(
        run_id="20260101T000000Z-abcdef",
        created_at="2026-01-01T00:00:00+00:00",
        finished_at="2026-01-01T00:01:00+00:00",
        config={
            "band": {"too_hard": band[0], "too_easy": band[1]},
            "sampler": {"backend": "replay", "samples": 4},
        },
        config_fingerprint="0123456789abcdef",
        packages={"tasksieve": "0.1.0"},
        model_id="test-model",
        sampler="replay",
        sandbox={"backend": "process", "isolation": "bwrap"},
        inputs=["examples/tasks"],
        counts={
            "input": len(tasks) + len(rejects),
            "kept": len(tasks),
            "rejected": len(rejects),
            "rollouts": len(rollouts),
        },
        rejected_by_reason=dict(sorted(reasons.items())),
        stage_counters={"ingest.records": len(tasks) + len(rejects)},
        pass_rate_histogram=dict(Counter(_bin(r) for r in rates)),
        outputs={},
    )
    (out / "manifest.json").write_text(manifest.model_dump_json(indent=2))
    return out


def mixed_run(out: Path) -> Path:
    """Two families, rejections at several stages, every verdict status."""
    tasks = [task("code.a", "code", 2), task("code.b", "code", 1), task("sql.a", "sql", 3)]
    rejects = [
        rejected(None, None, "validate", "validate.parse_error"),
        rejected("shell.x", "shell", "validate", "validate.schema"),
        rejected("code.dup", "code", "exact_dedup", "dedup.exact"),
        rejected("code.near", "code", "near_dedup", "dedup.near"),
        rejected("code.he", "code", "decontaminate", "decontam.humaneval"),
        rejected("sql.ref", "sql", "gates", "gate.reference_failed"),
        rejected("code.easy", "code", "filter", "filter.too_easy", k=4),
        rejected("code.hard", "code", "filter", "filter.too_hard", k=0),
        rejected("sql.hard", "sql", "filter", "filter.too_hard", k=0),
        rejected("sql.hard2", "sql", "filter", "filter.too_hard", k=0),
    ]
    statuses = ("pass", "fail", "error", "timeout", "infra_error")
    rollouts = [
        rollout(tid, fam, i, statuses[(i + j) % len(statuses)])
        for j, (tid, fam) in enumerate(
            [
                ("code.a", "code"),
                ("code.b", "code"),
                ("sql.a", "sql"),
                ("code.easy", "code"),
                ("code.hard", "code"),
                ("sql.hard", "sql"),
                ("sql.hard2", "sql"),
            ]
        )
        for i in range(4)
    ]
    return make_run(out, tasks, rejects, rollouts)
