"""Sandboxes: the interface with its declared capabilities, and one sub-package per backend.

``process`` (Linux namespaces via bubblewrap, a warm fork server, rlimits, seccomp) and
``docker`` (hardened warm containers). Programs under a ``guest/`` folder run inside the
sandbox: standard library only, never importing the host side (a test enforces it).
"""

from tasksieve.verifiers.sandbox.base import (
    Capabilities,
    Execution,
    Limits,
    PairedRun,
    Sandbox,
    SandboxUnavailable,
    SpawnedRun,
    base_python,
)

__all__ = [
    "Capabilities",
    "Execution",
    "Limits",
    "PairedRun",
    "Sandbox",
    "SandboxUnavailable",
    "SpawnedRun",
    "base_python",
]
