"""One sandbox, verifier cache and verification thread pool per worker process.

The sandbox stages (gates, test strength, verify, ambiguity) each hold a ``SharedSandbox``
handle. Every DoFn instance built with the same sandbox config for the same run acquires, in
each worker process, the same ``WorkerSandbox`` through ``apache_beam.utils.shared``: one fork
server, one set of warm family workers (e.g. the SQL slots) and one thread pool of
``SandboxConfig.workers`` threads per process, however many DoFn threads the runner starts.
Samples of different tasks handled by concurrent bundles share that pool, so a process
verifies up to ``workers`` samples at a time across tasks instead of each DoFn thread holding
its own pool for one task's samples.

Lifetime: a DoFn acquires in ``setup`` and releases in ``teardown``; the last release closes
the sandbox, and the next acquire in that process builds a fresh one. A process that ends
without teardown (Beam calls it best effort) closes it through a finalizer at exit.

What it does NOT guard against: a runner that never reuses a worker process still builds one
sandbox per process (per bundle, at worst); stages with different sandbox configs get
separate sandboxes; the thread pool bounds sample verification only, while gates, test
strength and ambiguity run in the runner's own bundle threads.
"""

from __future__ import annotations

import threading
import weakref
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from apache_beam.utils import shared

from tasksieve.transforms.runtime.common import count_sandbox
from tasksieve.verifiers import Sandbox, SandboxConfig
from tasksieve.verifiers.registry import VerifierCache

_LOCK = threading.Lock()
_GENERATION: dict[str, int] = {}  # handle key -> how many times its sandbox was closed here
_COUNTED: set[str] = set()  # handle keys this process has reported to the manifest counter
_HANDLES: dict[tuple[SandboxConfig, str], shared.Shared] = {}  # driver side, per (config, run)


class WorkerSandbox:
    """The per-process resources: the sandbox, its verifiers and the verification pool."""

    def __init__(self, cfg: SandboxConfig) -> None:
        self.sandbox: Sandbox = cfg.make()
        self.verifiers = VerifierCache(self.sandbox)
        self.pool = ThreadPoolExecutor(max_workers=cfg.workers, thread_name_prefix="verify")
        self.described: dict[str, Any] = dict(self.sandbox.describe())
        self.users = 0
        self._finalizer = weakref.finalize(self, _close, self.pool, self.verifiers, self.sandbox)

    def close(self) -> None:
        """Stop the pool, the verifiers' warm workers and the sandbox (idempotent)."""
        self._finalizer()


def _close(pool: ThreadPoolExecutor, verifiers: VerifierCache, sandbox: Sandbox) -> None:
    pool.shutdown(wait=True)
    verifiers.close()
    sandbox.close()


class SharedSandbox:
    """A picklable handle to the per-process ``WorkerSandbox`` of one sandbox config and run.

    Built on the driver; DoFns of one run with equal configs get the same handle, so after
    pickling their copies still name the same shared object in each worker.
    """

    def __init__(self, cfg: SandboxConfig, run_id: str) -> None:
        self.cfg = cfg
        with _LOCK:
            self._handle = _HANDLES.setdefault((cfg, run_id), shared.Shared())

    @property
    def key(self) -> str:
        return str(self._handle._key)

    def acquire(self) -> WorkerSandbox:
        """This process's ``WorkerSandbox``, built on first use; pair with ``release``."""
        with _LOCK:
            tag = _GENERATION.get(self.key, 0)
            res: WorkerSandbox = self._handle.acquire(lambda: WorkerSandbox(self.cfg), tag=tag)
            res.users += 1
            return res

    def release(self, res: WorkerSandbox) -> None:
        """Give ``res`` back; the last user in the process closes it."""
        with _LOCK:
            res.users -= 1
            if res.users > 0:
                return
            _GENERATION[self.key] = _GENERATION.get(self.key, 0) + 1
        res.close()

    def count_once(self, res: WorkerSandbox) -> None:
        """Report this process's sandbox to the manifest once (``used_by_workers``).

        Called from ``process`` (Beam counters need a bundle); each worker process counts
        once per run, whichever stage gets there first.
        """
        if self.key in _COUNTED:
            return
        with _LOCK:
            if self.key in _COUNTED:
                return
            _COUNTED.add(self.key)
        count_sandbox(res.described)
