"""Sandbox backends and one Verifier per task family (no Beam here)."""

from verifiers.base import Execution, Limits, Sandbox, UnsupportedFamily, Verifier

__all__ = ["Execution", "Limits", "Sandbox", "UnsupportedFamily", "Verifier"]
