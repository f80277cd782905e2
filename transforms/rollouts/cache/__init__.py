"""The rollout cache: completions and verdicts stored by content key, reused by re-runs.

``keys`` says what a key covers, ``store`` how entries live on storage (FileSystems, crash
safe, compacted), ``sampler`` wraps a sampler ModelHandler, ``verdicts`` serves the verify
stage (``sampler.wrap_handler`` and ``verdicts.VerdictCache`` are what it calls).
"""

from __future__ import annotations

from tasksieve.transforms.rollouts.cache.store import CacheConfig, compact_all

__all__ = ["CacheConfig", "compact_all"]
