"""Per-sample seeds: one deterministic seed per (run seed, task, sample index)."""

from __future__ import annotations

import hashlib


def sample_seed(seed: int, task_id: str, index: int) -> int:
    """Deterministic 63-bit seed for sample ``index`` of ``task_id`` under run seed ``seed``."""
    digest = hashlib.sha256(f"{seed}\x00{task_id}\x00{index}".encode()).digest()
    return int.from_bytes(digest[:8], "big") & ((1 << 63) - 1)
