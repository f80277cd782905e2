"""Per-task scores from an eval's rollout rows: n, c, pass@k, by turn, cost, failures, rewards.

Plain functions over the rows ``rollouts/`` holds (``schemas.Rollout`` as dicts), no Beam.

- A sample (one-turn) or an episode (multi-turn: the rows sharing ``sample_index``) counts in
  ``n`` unless its verdict (an episode's last) is ``infra_error``, which says nothing about the
  model; ``c`` counts those passed (an episode passes when any turn passes).
- ``c_by_turn[t-1]``: episodes passed by turn t (one-turn runs: ``[c]``).
- Failure kinds, over every attempt that did not pass: ``protocol`` when the completion held
  no solution to run (nothing extracted) or was cut off at the token limit; otherwise
  ``wrong`` (verdict ``fail``), ``error``, ``timeout``; ``infra`` for infra errors.
- Cost: ``completion_tokens`` and ``prompt_tokens`` summed where the sampler reported them
  (null when none did: replay records no tokens); ``sandbox_s``, the verifications' wall time
  summed; ``sandbox_cpu_s``, the CPU seconds their processes used in the sandbox
  (``Verdict.cpu_s``), summed over the verdicts that carry it, with ``cpu_measured`` how many
  did (out of ``attempts``; null and 0 when none did: a backend or family that cannot measure).
- Agent runs (``agent=True``, one row per episode): ``c_by_turn[s-1]`` counts the episodes
  passed within s steps; failure kinds come from the episode's ending
  (``pipeline.eval.agent_scores``); ``sandbox_s`` adds the steps' sandbox time and
  ``sandbox_cpu_s`` the steps' CPU seconds (trajectory ``cpu_s``, where read), while
  ``cpu_measured`` still counts the verdicts that carried theirs.
- Rewards: the mean over scored attempts of the reward and of each component.
- Difficulty bucket from the curated pass rate (``hard`` < 0.25 <= ``medium`` < 0.75 <=
  ``easy``), ``uncalibrated`` for tasks read from files.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from tasksieve.pipeline.eval.agent_scores import agent_failure_kind
from tasksieve.pipeline.eval.passk import pass_at_k

FAILURE_KINDS = ("wrong", "error", "timeout", "protocol", "infra")
COMPONENTS = ("base", "runtime_penalty", "limit_penalty", "style_penalty")
BUCKETS = ((0.25, "hard"), (0.75, "medium"), (1.01, "easy"))
UNCALIBRATED = "uncalibrated"


def bucket(pass_rate: float | None) -> str:
    """The difficulty bucket of a curated pass rate."""
    if pass_rate is None:
        return UNCALIBRATED
    return next(name for upper, name in BUCKETS if pass_rate < upper)


def failure_kind(row: dict[str, Any]) -> str | None:
    """What kind of failure one attempt is (None: it passed)."""
    status = row["verdict"]["status"]
    if status == "pass":
        return None
    if status == "infra_error":
        return "infra"
    if not str(row.get("solution") or "").strip() or row.get("finish_reason") == "length":
        return "protocol"
    return {"fail": "wrong", "error": "error", "timeout": "timeout"}.get(status, "error")


def _sum(values: Iterable[Any]) -> int | None:
    known = [int(v) for v in values if v is not None]
    return sum(known) if known else None


def _episodes(rows: Sequence[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    by_index: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_index[int(row["sample_index"])].append(row)
    return [sorted(e, key=lambda r: int(r["turn"])) for _, e in sorted(by_index.items())]


def task_score(
    rows: Sequence[dict[str, Any]],
    meta: dict[str, Any],
    ks: Sequence[int],
    turns: int,
    agent: bool = False,
    step_s: float = 0.0,
    step_cpu_s: float | None = None,
) -> dict[str, Any]:
    """One task's row of ``scores/`` from its rollout rows and its ``meta/`` row
    (``agent``: the rows are episodes, ``step_s`` and ``step_cpu_s`` their steps' sandbox wall
    and CPU seconds)."""
    episodes = [e for e in _episodes(rows) if e[-1]["verdict"]["status"] != "infra_error"]
    n = len(episodes)
    c_by_turn = []
    for t in range(1, turns + 1):
        c_by_turn.append(
            sum(
                1
                for e in episodes
                if any(r["verdict"]["status"] == "pass" for r in e if r["turn"] <= t)
            )
        )
    c = c_by_turn[-1]
    kinds = dict.fromkeys(FAILURE_KINDS, 0)
    for row in rows:
        kind = agent_failure_kind(row) if agent else failure_kind(row)
        if kind is not None:
            kinds[kind] += 1
    scored = [r for r in rows if r.get("reward") is not None]
    comps = [r["reward_components"] for r in scored if r.get("reward_components")]
    out: dict[str, Any] = {
        "task_id": meta["task_id"],
        "family": meta["family"],
        "source": meta["source"],
        "bucket": bucket(meta.get("curated_pass_rate")),
        "curated_pass_rate": meta.get("curated_pass_rate"),
        "model_id": rows[0]["model_id"] if rows else "",
        "n": n,
        "c": c,
        "attempts": len(rows),
        "c_by_turn": c_by_turn,
    }
    for k in ks:
        out[f"pass_at_{k}"] = pass_at_k(n, c, k)
    out.update({f"fail_{kind}": kinds[kind] for kind in FAILURE_KINDS})
    out["completion_tokens"] = _sum(r.get("completion_tokens") for r in rows)
    out["prompt_tokens"] = _sum(r.get("prompt_tokens") for r in rows)
    out["sandbox_s"] = float(sum(r["verdict"]["duration_s"] for r in rows)) + step_s
    cpu = [float(c) for r in rows if (c := r["verdict"].get("cpu_s")) is not None]
    spent = cpu if step_cpu_s is None else [*cpu, step_cpu_s]
    out["sandbox_cpu_s"] = sum(spent) if spent else None
    out["cpu_measured"] = len(cpu)
    out["reward"] = sum(r["reward"] for r in scored) / len(scored) if scored else None
    for name in COMPONENTS:
        out[f"reward_{name}"] = sum(float(x[name]) for x in comps) / len(comps) if comps else None
    return out


def task_scores(
    rollouts: Iterable[dict[str, Any]],
    metas: Iterable[dict[str, Any]],
    rejected_ids: set[str],
    ks: Sequence[int],
    turns: int,
    agent: bool = False,
    steps: dict[str, tuple[float, float | None]] | None = None,
) -> list[dict[str, Any]]:
    """Every scored task's row (tasks in ``rejected_ids`` left out), ordered by task id."""
    by_task: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rollouts:
        by_task[row["task_id"]].append(row)
    out = []
    for meta in sorted(metas, key=lambda m: m["task_id"]):
        tid = meta["task_id"]
        if tid in rejected_ids or tid not in by_task:
            continue
        wall, cpu = (steps or {}).get(tid, (0.0, None))
        out.append(task_score(by_task[tid], meta, ks, turns, agent, wall, cpu))
    return out
