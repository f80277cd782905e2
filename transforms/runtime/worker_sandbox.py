"""One sandbox, verifier cache and verification thread pool per worker process.

The sandbox stages (gates, test strength, verify, ambiguity, adaptive rounds, episode turns)
are ``SandboxDoFn`` subclasses: the base holds a ``SharedSandbox`` handle, acquires in
``setup``, releases in ``teardown`` and looks verifiers up; the subclasses only ``process``.
Every DoFn instance built with the same sandbox config for the same run acquires, in each
worker process, the same ``WorkerSandbox`` through ``apache_beam.utils.shared``: one fork
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

import apache_beam as beam
from apache_beam.utils import shared

from tasksieve.transforms.runtime.common import count_sandbox
from tasksieve.transforms.runtime.items import Item, rejection
from tasksieve.verifiers import Sandbox, SandboxConfig, UnsupportedFamily, Verifier
from tasksieve.verifiers.registry import VerifierCache

_LOCK = threading.Lock()
_GENERATION: dict[str, int] = {}  # handle key -> how many times its sandbox was closed here
_COUNTED: set[str] = set()  # handle keys this process has reported to the manifest counter
_HANDLES: dict[tuple[SandboxConfig, str], shared.Shared] = {}  # driver side, per (config, run)


class WorkerSandbox:
    """The per-process resources: the sandbox, its verifiers and the verification pool."""

    def __init__(self, cfg: SandboxConfig) -> None:
        self.sandbox: Sandbox = cfg.make()
        self.verifiers = VerifierCache(self.sandbox, cfg.snapshot_store)
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


class SandboxDoFn(beam.DoFn):
    """The base of every DoFn that uses its worker process's ``WorkerSandbox``.

    It owns the lifetime (acquire in ``setup``, release in ``teardown``; a subclass that
    overrides either calls ``super()``) and the verifier lookup. In ``process`` the sandbox,
    verifiers and pool are the properties of that name; using them outside setup/teardown
    raises ``AttributeError`` (what Beam's DoFn introspection expects of a missing attribute)
    rather than returning a closed sandbox.
    """

    def __init__(self, sandbox: SandboxConfig, run_id: str) -> None:
        self.sandbox_cfg = sandbox
        self.run_id = run_id
        self.shared = SharedSandbox(sandbox, run_id)  # one sandbox and pool per process
        self.res: WorkerSandbox | None = None

    def setup(self) -> None:
        self.res = self.shared.acquire()

    def teardown(self) -> None:
        if self.res is not None:
            res, self.res = self.res, None
            self.shared.release(res)

    @property
    def worker(self) -> WorkerSandbox:
        """This process's resources, held between ``setup`` and ``teardown``."""
        if self.res is None:
            raise AttributeError(f"{type(self).__name__} has no sandbox outside setup/teardown")
        return self.res

    @property
    def sandbox(self) -> Sandbox:
        return self.worker.sandbox

    @property
    def verifiers(self) -> VerifierCache:
        return self.worker.verifiers

    @property
    def pool(self) -> ThreadPoolExecutor:
        return self.worker.pool

    def count_sandbox(self) -> None:
        """Report this worker's sandbox to the manifest (once per process; from ``process``)."""
        self.shared.count_once(self.worker)

    def verifier_for(self, item: Item, stage: str, **fields: Any) -> Verifier | dict[str, Any]:
        """The verifier of the item's family, or its ``verifier.unsupported`` rejection row.

        ``fields`` are further columns of that row (``n``, ``n_requested``). Also reports the
        sandbox to the manifest (``count_sandbox``).
        """
        self.count_sandbox()
        try:
            return self.verifiers.get(item.task.family)
        except UnsupportedFamily as exc:
            return rejection(
                stage=stage,
                reason="verifier.unsupported",
                detail=str(exc),
                run_id=self.run_id,
                item=item,
                **fields,
            )
