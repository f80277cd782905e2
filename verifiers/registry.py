"""Look up sandbox backends and verifiers by name."""

from __future__ import annotations

import os
import threading

from tasksieve.verifiers.families.base import UnsupportedFamily, Verifier
from tasksieve.verifiers.families.probes import Differ
from tasksieve.verifiers.sandbox.base import Sandbox

SANDBOXES: tuple[str, ...] = ("process", "docker", "remote")


def make_sandbox(
    name: str = "process",
    allow_weak_isolation: bool = False,
    urls: tuple[str, ...] = (),
    token_env: str = "TASKSIEVE_SERVICE_TOKEN",
    priority: str = "curation",
) -> Sandbox:
    """Build the sandbox backend called ``name`` (``process``, ``docker`` or ``remote``).

    ``urls``, ``token_env`` and ``priority`` are the remote backend's: the service's URLs,
    the environment variable holding its bearer token, and the priority its requests name.
    """
    if name == "remote":
        from tasksieve.verifiers.remote import RemoteSandbox

        return RemoteSandbox(urls, token_env=token_env, priority=priority)
    if name == "process":
        from tasksieve.verifiers.sandbox.process.sandbox import ProcessSandbox

        return ProcessSandbox(allow_weak_isolation=allow_weak_isolation)
    if name == "docker":  # image from $TASKSIEVE_SANDBOX_IMAGE or the built default
        from tasksieve.verifiers.sandbox.docker.sandbox import DockerSandbox

        return DockerSandbox()
    raise ValueError(f"unknown sandbox {name!r}; choose one of: {', '.join(SANDBOXES)}")


FAMILIES_SUPPORTED: tuple[str, ...] = ("code", "sql", "config", "api", "repo")
SNAPSHOT_STORE_ENV = "TASKSIEVE_SNAPSHOT_STORE"


def get_verifier(family: str, sandbox: Sandbox, snapshot_store: str | None = None) -> Verifier:
    """A new verifier for a task family, running its executions in ``sandbox``.

    Some verifiers hold warm workers: reuse one per family (see ``VerifierCache``) and close it.
    A backend with ``whole_verifications`` (the sandbox service) gets the remote verifier,
    except for ``repo`` tasks: their snapshots live in a store on this side, so the repo
    verifier runs here and sends each run through ``Sandbox.run`` (packed files).
    ``snapshot_store`` is the repo family's store directory (None: ``$TASKSIEVE_SNAPSHOT_STORE``,
    else none, and every repo task is rejected saying so).
    """
    if family not in FAMILIES_SUPPORTED:
        raise UnsupportedFamily(
            f"no verifier for family {family!r} (supported: {', '.join(FAMILIES_SUPPORTED)})"
        )
    if family == "repo":
        from tasksieve.verifiers.families.repo.verifier import RepoVerifier

        return RepoVerifier(sandbox, snapshot_store or os.environ.get(SNAPSHOT_STORE_ENV) or None)
    if sandbox.capabilities.whole_verifications:
        from tasksieve.verifiers.remote import RemoteVerifier

        return RemoteVerifier(sandbox, family)
    if family == "code":
        from tasksieve.verifiers.families.python.verifier import PythonVerifier

        return PythonVerifier(sandbox)
    if family == "sql":
        from tasksieve.verifiers.families.sql.verifier import SqlVerifier

        return SqlVerifier(sandbox)
    if family == "config":
        from tasksieve.verifiers.families.config.verifier import ConfigVerifier

        return ConfigVerifier(sandbox)
    if family == "api":
        from tasksieve.verifiers.families.api.verifier import ApiVerifier

        return ApiVerifier(sandbox)
    raise UnsupportedFamily(
        f"no verifier for family {family!r} (supported: {', '.join(FAMILIES_SUPPORTED)})"
    )


class VerifierCache:
    """One verifier per family over one sandbox, created on first use, closed together."""

    def __init__(self, sandbox: Sandbox, snapshot_store: str | None = None) -> None:
        self.sandbox = sandbox
        self.snapshot_store = snapshot_store
        self._verifiers: dict[str, Verifier] = {}
        self._lock = threading.Lock()

    def get(self, family: str) -> Verifier:
        with self._lock:
            if family not in self._verifiers:
                self._verifiers[family] = get_verifier(family, self.sandbox, self.snapshot_store)
            return self._verifiers[family]

    def close(self) -> None:
        with self._lock:
            for verifier in self._verifiers.values():
                verifier.close()
            self._verifiers.clear()


def get_differ(family: str, snapshot_store: str | None = None) -> Differ:
    """The family's mutants, probes and observations (see ``tasksieve.verifiers.families.probes``).

    Each family keeps its differ in ``verifiers/families/<family>/differ.py``.
    ``snapshot_store``: the repo family's store (None: ``$TASKSIEVE_SNAPSHOT_STORE``).
    """
    if family == "repo":
        from tasksieve.verifiers.families.repo.differ import RepoDiffer

        return RepoDiffer(snapshot_store or os.environ.get(SNAPSHOT_STORE_ENV) or None)
    if family == "code":
        from tasksieve.verifiers.families.python.differ import PythonDiffer

        return PythonDiffer()
    if family == "sql":
        from tasksieve.verifiers.families.sql.differ import SqlDiffer

        return SqlDiffer()
    if family == "config":
        from tasksieve.verifiers.families.config.differ import ConfigDiffer

        return ConfigDiffer()
    if family == "api":
        from tasksieve.verifiers.families.api.differ import ApiDiffer

        return ApiDiffer()
    raise UnsupportedFamily(
        f"no differ for family {family!r} (supported: {', '.join(FAMILIES_SUPPORTED)})"
    )
