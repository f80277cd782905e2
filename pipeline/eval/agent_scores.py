"""Plain functions that score agent episodes in an eval (no Beam): failure kinds, step time.

An agent eval's rollout rows are one per episode (``transforms.agent.rows.rollout_row``):
``finish_reason`` is the episode's ending, ``turn`` its steps, the verdict the repo verifier's
on the final workspace (or ``fail`` for an episode a budget ended). Its trajectory rows are one
per step, with the step's sandbox wall time.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from typing import Any

BUDGET_KINDS = {
    "max_steps": "timeout",
    "max_tokens": "timeout",
    "wall": "timeout",
    "protocol_errors": "protocol",
    "session_lost": "error",
}
"""Episode endings before submit, as failure kinds: a step, token or wall budget that ran out
is a ``timeout`` (the agent's time, however counted, ran out), too many replies that broke
the protocol a ``protocol`` failure, a session the agent lost (it killed its shell, hit a
session limit) an ``error``."""


def agent_failure_kind(row: dict[str, Any]) -> str | None:
    """The failure kind of one episode's rollout row (None: it passed).

    A submitted episode fails by its verdict (``fail`` is ``wrong``); one that ended on a
    budget by ``BUDGET_KINDS``; ``infra`` when its verdict is ``infra_error``."""
    status = row["verdict"]["status"]
    if status == "pass":
        return None
    if status == "infra_error":
        return "infra"
    kind = BUDGET_KINDS.get(str(row.get("finish_reason")))
    if kind is not None:
        return kind
    return {"fail": "wrong", "error": "error", "timeout": "timeout"}.get(status, "error")


def step_costs(steps: Iterable[dict[str, Any]]) -> dict[str, tuple[float, float | None]]:
    """Per task, the sandbox wall seconds of its episodes' steps (trajectory rows) and their
    CPU seconds (summed where a step carries them; None when none does)."""
    wall: dict[str, float] = defaultdict(float)
    cpu: dict[str, float] = {}
    for s in steps:
        tid = str(s["task_id"])
        wall[tid] += float(s["duration_s"] or 0.0)
        if s.get("cpu_s") is not None:
            cpu[tid] = cpu.get(tid, 0.0) + float(s["cpu_s"])
    return {tid: (w, cpu.get(tid)) for tid, w in wall.items()}


def endings(rollouts: Iterable[dict[str, Any]]) -> dict[str, int]:
    """How many episodes ended each way (submitted, max_steps, ...), sorted by ending."""
    return dict(sorted(Counter(str(r.get("finish_reason")) for r in rollouts).items()))
