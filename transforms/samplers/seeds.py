"""Per-sample seeds: one deterministic seed per (run seed, task, sample index)."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tasksieve.transforms.samplers.config import SampleRequest


def sample_seed(seed: int, task_id: str, index: int) -> int:
    """Deterministic 63-bit seed for sample ``index`` of ``task_id`` under run seed ``seed``."""
    digest = hashlib.sha256(f"{seed}\x00{task_id}\x00{index}".encode()).digest()
    return int.from_bytes(digest[:8], "big") & ((1 << 63) - 1)


def request_seed(seed: int, req: SampleRequest, index: int) -> int:
    """The seed of completion ``index`` of ``req``.

    Turn 1: ``sample_seed(seed, task_id, index)``, as a one-turn run. A later turn of episode
    j (one completion per request, ``index`` 0) gets a seed of its own per (task, episode,
    turn), so no two attempts of a run share a seed.
    """
    if req.turn == 1 and req.episode is None:
        return sample_seed(seed, req.task_id, index)
    episode = index if req.episode is None else req.episode + index
    return sample_seed(seed, f"{req.task_id}\x00turn {req.turn}", episode)
