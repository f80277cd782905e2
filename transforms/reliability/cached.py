"""Gates and detectors through the rollout cache: an outcome is measured once per content.

``strength`` and ``ambiguity`` are the plain measurements (``measure_strength``,
``measure_ambiguity``) behind a ``DetectorCache`` lookup (None: no cache, measure every time);
``gates.cached_gates`` does the same for ``run_gates``. What a key holds and what is never
stored is said in ``tasksieve.transforms.rollouts.cache.detectors``; a stored entry that no
longer reads as the stage's result (another schema) is measured again and counted as
``cache.corrupt_entries``.

``CachedStage`` is the part of a stage DoFn that owns the cache: built from the run's cache
directory (``--rollout-cache``; None with ``--no-cache``), loaded in ``setup``, written at the
end of every bundle.
"""

from __future__ import annotations

from collections.abc import Sequence

from tasksieve.schemas import TaskRecord
from tasksieve.transforms.rollouts.cache.detectors import DetectorCache, settings
from tasksieve.transforms.runtime.common import count
from tasksieve.verifiers import SandboxConfig, Verifier
from tasksieve.verifiers.families.probes import Differ
from tasksieve.verifiers.reliability import (
    AmbiguityConfig,
    AmbiguityReport,
    StrengthConfig,
    StrengthReport,
    measure_ambiguity,
    measure_strength,
)
from tasksieve.verifiers.reliability.records import (
    ambiguity_from_json,
    cacheable,
    report_to_json,
    strength_from_json,
)
from tasksieve.verifiers.sandbox.base import Sandbox


def strength(
    cache: DetectorCache | None,
    task: TaskRecord,
    verifier: Verifier,
    differ: Differ,
    sandbox: Sandbox,
    cfg: StrengthConfig,
) -> StrengthReport:
    """``measure_strength``, looked up first; a report with undecided mutants is not kept."""
    if cache is None:
        return measure_strength(task, verifier, differ, sandbox, cfg)
    key = cache.key("test_strength", task, settings(cfg))
    stored = cache.get("test_strength", task, key)
    if stored is not None:
        try:
            return strength_from_json(stored)
        except ValueError:
            count("cache.corrupt_entries")
    report = measure_strength(task, verifier, differ, sandbox, cfg)
    if cacheable(report):
        cache.put(task, key, report_to_json(report))
    return report


def ambiguity(
    cache: DetectorCache | None,
    task: TaskRecord,
    passing: Sequence[tuple[int, str]],
    differ: Differ,
    sandbox: Sandbox,
    cfg: AmbiguityConfig,
) -> AmbiguityReport:
    """``measure_ambiguity``, looked up by the task and its passing samples (with indices)."""
    if cache is None:
        return measure_ambiguity(task, passing, differ, sandbox, cfg)
    key = cache.key("ambiguity", task, settings(cfg), [[i, s] for i, s in passing])
    stored = cache.get("ambiguity", task, key)
    if stored is not None:
        try:
            return ambiguity_from_json(stored)
        except ValueError:
            count("cache.corrupt_entries")
    report = measure_ambiguity(task, passing, differ, sandbox, cfg)
    if cacheable(report):
        cache.put(task, key, report_to_json(report))
    return report


class CachedStage:
    """The detector cache of one stage DoFn (a mixin beside ``SandboxDoFn``)."""

    detector_cache: DetectorCache | None = None

    def init_cache(self, cache_dir: str | None, sandbox: SandboxConfig) -> None:
        """Use the cache at ``cache_dir`` (None: measure everything afresh)."""
        self.detector_cache = DetectorCache(cache_dir, sandbox) if cache_dir else None

    def setup_cache(self) -> None:
        if self.detector_cache is not None:
            self.detector_cache.setup()

    def flush_cache(self) -> None:
        if self.detector_cache is not None:
            self.detector_cache.flush()
