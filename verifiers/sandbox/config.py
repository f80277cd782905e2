"""Which sandbox backend runs untrusted code (shared by the pipeline, service and trainer)."""

from __future__ import annotations

from dataclasses import dataclass

from tasksieve.verifiers.sandbox.base import Sandbox

TOKEN_ENV = "TASKSIEVE_SERVICE_TOKEN"
PRIORITY_NAMES = ("training", "interactive", "curation", "batch")


@dataclass(frozen=True)
class SandboxConfig:
    """Which sandbox backend runs untrusted code, and whether weak isolation is accepted.

    The ``remote`` backend sends whole verifications to the sandbox service at ``urls``
    (spread and failed over by the client), with the bearer token read from the
    environment variable ``token_env`` and the scheduling ``priority`` named per request
    (a trainer uses ``training``, which the service runs ahead of ``curation``).
    ``snapshot_store`` is the directory of repo-task snapshots (``--snapshot-store``); it
    travels with this config to every worker, where the repo verifier reads it (None: the
    ``TASKSIEVE_SNAPSHOT_STORE`` variable on the worker, else no store).
    """

    backend: str = "process"
    allow_weak_isolation: bool = False
    workers: int = 2
    urls: tuple[str, ...] = ()
    token_env: str = TOKEN_ENV
    priority: str = "curation"
    snapshot_store: str | None = None

    def __post_init__(self) -> None:
        if self.workers < 1:
            raise ValueError(f"need sandbox workers >= 1, got {self.workers}")
        if self.backend == "remote" and not self.urls:
            raise ValueError("the remote sandbox needs --sandbox-url URL[,URL...]")
        if self.urls and self.backend != "remote":
            raise ValueError(f"--sandbox-url needs --sandbox remote, not {self.backend!r}")
        bad = [u for u in self.urls if not u.startswith(("http://", "https://"))]
        if bad:
            raise ValueError(f"sandbox URLs must start with http:// or https://, got {bad}")
        if self.priority not in PRIORITY_NAMES:
            raise ValueError(
                f"unknown sandbox priority {self.priority!r}; use one of {PRIORITY_NAMES}"
            )

    def make(self) -> Sandbox:
        from tasksieve.verifiers.registry import make_sandbox

        return make_sandbox(
            self.backend,
            allow_weak_isolation=self.allow_weak_isolation,
            urls=self.urls,
            token_env=self.token_env,
            priority=self.priority,
        )
