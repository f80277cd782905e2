"""Summing the CPU seconds of the sandbox runs one verification makes (``Verdict.cpu_s``).

A family verifier opens ``metering()`` around one verification and calls ``charge`` with the
``Execution.cpu_s`` of every run it makes there; ``Meter.total`` is their sum, or None when any
run was not measured or none was made (a partial sum would undercount). The meter lives in a
``ContextVar``, so concurrent verifications in other threads never mix: a run a verification
hands to another thread is charged only if that thread's code charges it to this meter.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field

from tasksieve.verifiers.sandbox.base import sum_cpu


@dataclass
class Meter:
    """The CPU seconds of the runs charged so far (None for a run that was not measured)."""

    parts: list[float | None] = field(default_factory=list)

    def total(self) -> float | None:
        """Their sum; None when any part is None or there is none."""
        return sum_cpu(self.parts)


_CURRENT: ContextVar[Meter | None] = ContextVar("tasksieve_cpu_meter", default=None)


@contextlib.contextmanager
def metering() -> Iterator[Meter]:
    """A fresh meter for the runs of one verification (nested meters each count their own)."""
    meter = Meter()
    token = _CURRENT.set(meter)
    try:
        yield meter
    finally:
        _CURRENT.reset(token)


def charge(cpu_s: float | None) -> None:
    """Add one run's CPU seconds to the current meter (none open: nothing happens)."""
    meter = _CURRENT.get()
    if meter is not None:
        meter.parts.append(cpu_s)
