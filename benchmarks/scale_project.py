"""Projection of a curate run of many tasks on a cluster, from the scale benchmark's measurements.

Inputs are per-record costs measured here: CPU seconds per record of the host-only stages on
Beam at the largest size measured (split by stage in proportion to Beam's per-stage timers),
CPU seconds per task of the whole pipeline per family (process tree: the sandboxes' children
included), and the mean sizes of what the shuffles move. Everything else is an assumption,
stated in ``Assumptions`` and printed beside the result. What it does NOT model: stragglers,
autoscaling ramp-up, worker start-up, a model server (the replay sampler costs nothing
here; a real sampler's GPU hours come on top), or retries after failures.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SANDBOX = ("Gates", "TestStrength", "Rollouts", "Verify", "Ambiguity", "Filter")
ORDER = ("Ingest", "Validate", "ExactDedup", "NearDedup", "Decontaminate", *SANDBOX)
"""The curate stages in the order a record meets them."""


def entering(n_in: int, rejected_at: dict[str, int]) -> dict[str, int]:
    """Records entering each stage of ``ORDER``, from the input count and rejections per stage."""
    out, left = {}, n_in
    for stage in ORDER:
        out[stage] = left
        if stage != "Rollouts":
            left -= rejected_at.get(stage, 0)
    return out


@dataclass(frozen=True)
class Assumptions:
    """What the projection assumes beyond what was measured."""

    tasks: int = 10_000_000
    cores_per_worker: int = 4
    memory_gb_per_worker: float = 15.0
    utilisation: float = 0.7
    """Share of the workers' cores doing useful work (shuffle waits, skew, bundle edges)."""
    target_hours: float = 12.0
    family_mix: dict[str, float] = field(
        default_factory=lambda: {"code": 0.5, "sql": 0.3, "config": 0.2}
    )
    vcpu_hour_usd: float = 0.056
    gb_hour_usd: float = 0.0036
    shuffle_gb_usd: float = 0.011
    """Assumed list prices (batch vCPU-hour, GB-hour, GB shuffled): replace with your own."""
    completion_bytes: int = 600
    cores_here: int = 2
    """Cores of the measuring machine: sandbox wall time x these is the upper bound."""

    def __post_init__(self) -> None:
        if self.tasks < 1 or self.cores_per_worker < 1:
            raise ValueError("need tasks >= 1 and cores_per_worker >= 1")
        if not 0.0 < self.utilisation <= 1.0:
            raise ValueError(f"utilisation must be in (0, 1], got {self.utilisation}")
        if abs(sum(self.family_mix.values()) - 1.0) > 1e-6:
            raise ValueError(f"family_mix must sum to 1, got {self.family_mix}")


def host_cpu_per_record(beam: dict[str, Any]) -> dict[str, float]:
    """CPU seconds per record per host stage: the run's CPU split by Beam's stage timers."""
    stages = beam["stage_s"]
    total = sum(stages.values()) or 1.0
    n = max(1, beam["records"])
    cpu = max(float(beam.get("tree_cpu_s", 0.0)), float(beam["cpu_s"]))
    return {k: cpu * v / total / n for k, v in stages.items()}


def sandbox_cpu_per_task(run: dict[str, Any], gated: int) -> float:
    """CPU seconds per task that reaches the gates, for the sandbox stages of one family: the
    run's CPU times the sandbox stages' share of its wall time (start-up spread evenly)."""
    stages = run["stage_s"]
    share = sum(v for k, v in stages.items() if k in SANDBOX) / max(run["wall_s"], 1e-9)
    return max(float(run.get("tree_cpu_s", 0.0)), float(run["cpu_s"])) * share / max(1, gated)


def sandbox_wall_per_task(run: dict[str, Any], gated: int) -> float:
    """Wall seconds per gated task in the sandbox stages (Beam's timers on the bundle thread)."""
    return sum(v for k, v in run["stage_s"].items() if k in SANDBOX) / max(1, gated)


def shuffle_bytes(sizes: dict[str, float], k: int, completion_bytes: int) -> float:
    """Bytes shuffled per input record (pickled sizes; see the projection's notes)."""
    if not sizes:
        return 0.0
    return (
        sizes["source_record"]  # Ingest's reshuffle
        + 4 * sizes["item"]  # Validate and ExactDedup groups, NearDedup's decision join, Rollouts
        + 3 * sizes["shingles"]  # the two confirmation joins and the first-half join
        + sizes["bands"] * 120  # (band, hash) -> key, per band
        + k * completion_bytes  # samples joined back to their task
    )


def projection(
    host: dict[str, dict[str, Any]], size: int, full: dict[str, dict[str, Any]], a: Assumptions
) -> str:
    """The projection as Markdown: assumptions, per-record costs, workers, hours, drivers."""
    beam, plain = host["beam"], host["plain"]
    per_stage = host_cpu_per_record(beam)
    host_s = sum(per_stage.values())
    survive = plain["survivors"] / max(1, plain["records"])
    low: dict[str, float] = {}
    high: dict[str, float] = {}
    for fam, run in full.items():
        gated = entering(run["records"], run["rejected_at"])["Gates"]
        low[fam] = sandbox_cpu_per_task(run, gated)
        high[fam] = sandbox_wall_per_task(run, gated) * a.cores_here
    mix = {f: w for f, w in a.family_mix.items() if f in low}
    norm = sum(mix.values()) or 1.0
    host_cpu_h = host_s * a.tasks / 3600
    rows = []
    for label, per_fam in (("lower bound (process-tree CPU)", low), ("upper bound", high)):
        per_task = sum(w / norm * per_fam[f] for f, w in mix.items())
        cpu_h = host_cpu_h + per_task * survive * a.tasks / 3600
        rows.append((label, per_task, cpu_h))
    k = next(iter(full.values())).get("samples", 4) if full else 4
    sizes = plain.get("sizes", {})
    shuffle_gb = shuffle_bytes(sizes, k, a.completion_bytes) * a.tasks / 1e9
    index_gb = (sizes.get("signature", 0) + sizes.get("shingles", 0)) * a.tasks / 1e9
    lines = [
        f"\n## Projection: {a.tasks:,} tasks",
        f"assumptions: {a}",
        f"measured: host stages {1000 * host_s:.2f} CPU-ms/record on Beam at {size:,} "
        f"({', '.join(f'{k} {1000 * v:.2f}' for k, v in sorted(per_stage.items()) if v)}); "
        f"{100 * survive:.1f}% of records reach the sandbox stages; sandbox stages per gated "
        f"task (K={k}), CPU-s lower / upper bound: "
        + ", ".join(f"{f} {low[f]:.2f} / {high[f]:.2f}" for f in low),
        "",
        "| quantity | " + " | ".join(r[0] for r in rows) + " |",
        "|---|" + "---|" * len(rows),
        f"| host-stage CPU, core-hours | {host_cpu_h:,.0f} | {host_cpu_h:,.0f} |",
        "| sandbox CPU per gated task, core-s | " + " | ".join(f"{r[1]:.2f}" for r in rows) + " |",
        "| total CPU, core-hours | " + " | ".join(f"{r[2]:,.0f}" for r in rows) + " |",
        f"| workers for {a.target_hours:g} h ({a.cores_per_worker} cores, "
        f"{100 * a.utilisation:.0f}% used) | "
        + " | ".join(f"{_workers(r[2], a):,}" for r in rows)
        + " |",
        "| hours on 100 such workers | "
        + " | ".join(f"{r[2] / (100 * a.cores_per_worker * a.utilisation):,.1f}" for r in rows)
        + " |",
        f"| shuffle volume (estimate), GB | {shuffle_gb:,.0f} | {shuffle_gb:,.0f} |",
        f"| near-dup index (signatures + shingle hashes), GB | {index_gb:,.1f} | {index_gb:,.1f} |",
        "| cost at the assumed prices, USD | "
        + " | ".join(f"{_usd(r[2], shuffle_gb, a):,.0f}" for r in rows)
        + " |",
    ]
    return "\n".join(lines)


def _workers(cpu_h: float, a: Assumptions) -> int:
    return max(1, round(cpu_h / (a.target_hours * a.utilisation) / a.cores_per_worker + 0.5))


def _usd(cpu_h: float, shuffle_gb: float, a: Assumptions) -> float:
    workers = _workers(cpu_h, a)
    mem_gb_h = workers * a.memory_gb_per_worker * a.target_hours
    return (
        cpu_h / a.utilisation * a.vcpu_hour_usd
        + mem_gb_h * a.gb_hour_usd
        + shuffle_gb * a.shuffle_gb_usd
    )
