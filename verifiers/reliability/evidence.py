"""Rejection details for the reliability detectors: short outputs and bounded evidence text."""

from __future__ import annotations

from dataclasses import dataclass, field

from tasksieve.verifiers.families.probes import Observation

SHOWN = 300  # characters of one output kept in evidence


def short(text: str, limit: int = SHOWN) -> str:
    """``text`` cut to ``limit`` characters, marked with ``...`` when cut."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def show(obs: Observation) -> str:
    """An observation as evidence: its value, or ``raises <type>``."""
    return short(obs.value if obs.ok else f"raises {obs.value}")


@dataclass(frozen=True)
class Evidence:
    """Text for a rejection's detail, built from a report (first few items only)."""

    head: str
    items: list[str] = field(default_factory=list)

    def text(self, limit: int = 1800) -> str:
        """The head, then as many whole items as fit in ``limit`` characters."""
        out = self.head
        for it in self.items:
            if len(out) + len(it) + 2 > limit:
                break
            out += "\n" + it
        return out[:limit]
