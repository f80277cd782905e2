"""The rollout cache: completions and verdicts stored by content key, reused by re-runs.

``keys`` says what a key covers, ``store`` how entries live on storage (FileSystems, crash
safe, compacted), ``sampler`` wraps a sampler ModelHandler, ``verdicts`` serves the verify
stage. ``wrap_handler`` is the one call the rollouts stage makes.
"""

from __future__ import annotations

from typing import Any

from transforms.rollout_cache.store import CacheConfig, compact_all

__all__ = ["CacheConfig", "compact_all", "wrap_handler"]


def wrap_handler(inner: Any, cfg: Any, root: str | None) -> Any:
    """``inner`` (a sampler ModelHandler for ``cfg``) behind the cache at ``root`` (None: as is)."""
    if root is None:
        return inner
    from transforms.rollout_cache.sampler import CachedModelHandler

    return CachedModelHandler(inner, cfg, root)
