"""The detector half of the rollout cache: gate results and reliability reports by content.

Gates, test strength and ambiguity cost most of a curate run's sandbox time (each task's
reference runs, up to ``max_mutants`` judged mutants, and probes observed for the reference,
the surviving mutants and the passing samples). Their outcome depends on the task and on
the settings only, so a re-run (or another run over the same tasks) looks it up instead of
measuring again. The entries live beside the samples and verdicts, in ``DIR/detectors/``
(same part files, checksums and forgiving reads as ``store``).

A detector key (``detector_key``) hashes: the stage name, ``KEY_VERSION`` and
``DETECTOR_KEY_VERSION``, the task as its verifier sees it (every ``TaskRecord`` field but
``source``, ``tags``, ``metadata`` and ``reward``: statement, verifier spec with its tests and
limits, reference solution, input domain), the stage's own settings (``StrengthConfig``,
``GatesConfig`` with its retry policy, ``AmbiguityConfig``; never the thread count), the
stage's further inputs (ambiguity: the passing samples with their indices), the sandbox
settings a verdict may depend on (``verdicts.sandbox_settings``: backend and isolation; the
servers' identity for the remote backend), the installed tasksieve version and a fingerprint
of the judging code (``code_fingerprint``: the ``verifiers`` package and these stages), so an
edit of a verifier, differ, mutation operator or probe generator misses even in a development
checkout whose version does not move.

Never stored (measured again next run): anything an infra error touched (a gate rejection
``gate.infra_error``, a strength report with undecided mutants, an ambiguity report that
could not observe); tasks of the ``repo`` family, whose outcome also depends on the snapshot
store's contents, which the key does not hold.

What a hit does NOT re-check, like the verdict cache: the reference runtime the mutants'
time limits are scaled from (measured anew each run) and a flaky reference (a reference that
passed three runs when the entry was written is not run again; ``--no-cache`` does).

Counters: ``cache.detector_hits``, ``cache.detector_misses`` (per stage: ``cache.<stage>_hits``).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
from pathlib import Path
from typing import Any

from tasksieve.schemas import TaskRecord
from tasksieve.transforms.rollouts.cache.keys import (
    _NOT_VERIFIED,
    KEY_VERSION,
    digest,
    verifier_version,
)
from tasksieve.transforms.rollouts.cache.parts import PartCache
from tasksieve.transforms.rollouts.cache.store import DETECTORS
from tasksieve.transforms.rollouts.cache.verdicts import sandbox_settings
from tasksieve.transforms.runtime.common import count
from tasksieve.verifiers import SandboxConfig

DETECTOR_KEY_VERSION = 1
UNCACHED_FAMILIES = frozenset({"repo"})  # their outcome depends on the snapshot store too
_NOT_SETTINGS = frozenset({"workers", "enabled"})  # how fast, not what is measured


@functools.cache
def code_fingerprint() -> str:
    """sha256 over the source of everything that judges: the ``verifiers`` package (families,
    differs, mutation operators, probe generators, sandboxes, the detectors) and the gates.

    A release bumps the version, but a development checkout edits code under one version; with
    this in the key an edit there misses instead of reusing outcomes the old code measured.
    """
    import tasksieve.transforms.reliability as stages
    import tasksieve.verifiers as verifiers

    h = hashlib.sha256()
    roots = [Path(verifiers.__file__).resolve().parent, Path(stages.__file__).resolve().parent]
    for root in roots:
        for path in sorted(root.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def settings(cfg: Any) -> dict[str, Any]:
    """A stage config (a dataclass) as key material, without its thread count."""
    return {k: v for k, v in dataclasses.asdict(cfg).items() if k not in _NOT_SETTINGS}


def detector_key(
    stage: str,
    task: TaskRecord,
    params: dict[str, Any],
    sandbox: dict[str, Any],
    inputs: Any = None,
) -> str:
    """Key of ``stage``'s outcome on ``task`` (see the module docstring for what it holds)."""
    return digest(
        {
            "kind": stage,
            "v": KEY_VERSION,
            "dv": DETECTOR_KEY_VERSION,
            "task": task.model_dump(mode="json", exclude=set(_NOT_VERIFIED)),
            "params": params,
            "inputs": inputs,
            "sandbox": sandbox,
            "tasksieve": verifier_version(),
            "code": code_fingerprint(),
        }
    )


class DetectorCache(PartCache):
    """Cached gate and detector outcomes of one cache directory, and new ones to write."""

    kind = DETECTORS
    noun = "detector outcomes"

    def __init__(self, root: str, sandbox: SandboxConfig) -> None:
        super().__init__(root, sandbox_settings(sandbox))

    def key(self, stage: str, task: TaskRecord, params: dict[str, Any], inputs: Any = None) -> str:
        """``detector_key`` under this cache's sandbox settings."""
        return detector_key(stage, task, params, self.sandbox, inputs)

    def get(self, stage: str, task: TaskRecord, key: str) -> Any | None:
        """The stored outcome of ``key`` (None: measure it), counted per stage."""
        assert self.loaded is not None, "DetectorCache.setup was not called"
        if task.family in UNCACHED_FAMILIES:
            return None
        with self.lock:
            found = self.pending.get(key, self.loaded.entries.get(key))
        count(f"cache.detector_{'hits' if found is not None else 'misses'}")
        count(f"cache.{stage}_{'hits' if found is not None else 'misses'}")
        return found

    def put(self, task: TaskRecord, key: str, value: Any) -> None:
        """Store ``value`` (plain JSON data) for ``key``; ``repo`` tasks are never stored."""
        if task.family in UNCACHED_FAMILIES:
            return
        with self.lock:
            self.pending[key] = value
            if self.loaded is not None:
                self.loaded.entries[key] = value  # later bundles of this worker see it too
