"""Sandbox backends and one Verifier per task family (no Beam here).

``verifiers.sandbox`` holds the Sandbox interface and its backends, ``verifiers.families``
the family verifiers; this package re-exports what other packages use.
"""

from tasksieve.verifiers.families.base import UnsupportedFamily, Verifier
from tasksieve.verifiers.registry import get_verifier, make_sandbox
from tasksieve.verifiers.sandbox.base import (
    Capabilities,
    Execution,
    Limits,
    Sandbox,
    SandboxUnavailable,
)
from tasksieve.verifiers.sandbox.config import SandboxConfig

__all__ = [
    "Capabilities",
    "Execution",
    "Limits",
    "Sandbox",
    "SandboxConfig",
    "SandboxUnavailable",
    "UnsupportedFamily",
    "Verifier",
    "get_verifier",
    "make_sandbox",
]
