"""Sandbox backends and one Verifier per task family (no Beam here)."""

from verifiers.base import (
    Execution,
    Limits,
    Sandbox,
    SandboxUnavailable,
    UnsupportedFamily,
    Verifier,
)
from verifiers.registry import get_verifier, make_sandbox

__all__ = [
    "Execution",
    "Limits",
    "Sandbox",
    "SandboxUnavailable",
    "UnsupportedFamily",
    "Verifier",
    "get_verifier",
    "make_sandbox",
]
