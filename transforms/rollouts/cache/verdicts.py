"""The verdict half of the rollout cache, used by ``transforms.rollouts.rounds.VerifySamplesFn``.

The cached verdicts are loaded once per worker process (``apache_beam.utils.shared``), not
per DoFn thread. Verdicts computed by a DoFn instance are buffered and written as one part
per bundle (``flush``), so a crash loses at most the bundle in flight. ``infra_error``
verdicts are never stored: they say nothing about the solution and are retried next run.

Counters: ``cache.verdict_hits``, ``cache.verdict_misses``, ``cache.corrupt_entries``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tasksieve.schemas import TaskRecord, Verdict
from tasksieve.transforms.rollouts.cache.keys import verdict_key
from tasksieve.transforms.rollouts.cache.parts import PartCache
from tasksieve.transforms.rollouts.cache.store import VERDICTS
from tasksieve.transforms.runtime.common import count
from tasksieve.verifiers import SandboxConfig
from tasksieve.verifiers.retry import RetryOutcome


def sandbox_settings(cfg: SandboxConfig) -> dict[str, Any]:
    """The sandbox settings a verdict may depend on (not where or how many).

    For the remote backend, the verdict is the servers' own: their tasksieve version and
    sandbox backend (asked once, from ``/healthz``) are part of it, not their addresses.
    """
    settings: dict[str, Any] = {
        "backend": cfg.backend,
        "allow_weak_isolation": cfg.allow_weak_isolation,
    }
    if cfg.backend == "remote":
        from tasksieve.verifiers.remote import server_identity

        settings["servers"] = server_identity(cfg.urls)
    return settings


class VerdictCache(PartCache):
    """Cached verdicts of one cache directory, and the new ones waiting to be written."""

    kind = VERDICTS
    noun = "verdicts"

    def __init__(self, root: str, sandbox: SandboxConfig) -> None:
        super().__init__(root, sandbox_settings(sandbox))

    def verify(
        self,
        task: TaskRecord,
        solutions: Sequence[str],
        run: Callable[[list[str]], list[RetryOutcome]],
    ) -> list[RetryOutcome]:
        """What ``run`` returns for the solutions that missed; the rest from the cache.

        A cached verdict comes back as a one-attempt ``RetryOutcome`` (so no retry is counted).
        """
        assert self.loaded is not None, "VerdictCache.setup was not called"
        self.loaded.report_corrupt()
        keys = [verdict_key(task, s, self.sandbox) for s in solutions]
        out: list[RetryOutcome | None] = []
        for key in keys:
            cached = _verdict(self.loaded.entries.get(key))
            out.append(None if cached is None else RetryOutcome(cached, 1))
        missed = [i for i, v in enumerate(out) if v is None]
        if len(missed) < len(keys):
            count("cache.verdict_hits", len(keys) - len(missed))
        if missed:
            count("cache.verdict_misses", len(missed))
            tries = run([solutions[i] for i in missed])
            with self.lock:
                for i, t in zip(missed, tries, strict=True):
                    out[i] = t
                    if t.verdict.status != "infra_error":
                        self.pending[keys[i]] = t.verdict.model_dump(mode="json")
        return [v for v in out if v is not None]


def _verdict(value: Any) -> Verdict | None:
    if value is None:
        return None
    try:
        return Verdict.model_validate(value)
    except ValueError:  # an entry from another schema version: verify again
        count("cache.corrupt_entries")
        return None
