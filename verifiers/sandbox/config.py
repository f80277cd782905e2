"""Which sandbox backend runs untrusted code (shared by the pipeline, service and trainer)."""

from __future__ import annotations

from dataclasses import dataclass

from verifiers.sandbox.base import Sandbox


@dataclass(frozen=True)
class SandboxConfig:
    """Which sandbox backend runs untrusted code, and whether weak isolation is accepted."""

    backend: str = "process"
    allow_weak_isolation: bool = False
    workers: int = 2

    def __post_init__(self) -> None:
        if self.workers < 1:
            raise ValueError(f"need sandbox workers >= 1, got {self.workers}")

    def make(self) -> Sandbox:
        from verifiers.registry import make_sandbox

        return make_sandbox(self.backend, allow_weak_isolation=self.allow_weak_isolation)
