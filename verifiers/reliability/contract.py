"""The probes a detector may use: inputs inside the task's contract, and distinct solutions.

A family that models its tasks' input contract implements ``ScopedDiffer.scoped_probes``
(the ``code`` family: ``tasksieve.verifiers.families.python.scope``); its probes carry the
reason they are in contract (``Probe.why``) and ``contracted=True``. Any other family's
probes are used as they come (``contracted=False``) and the detectors allow for some of them
lying outside the contract. Inputs the reference rejects (raises, hits a limit) are dropped
later, by the detectors, once the reference has been observed on them.

It does NOT guard against: a contract the statement states in words no rule here reads (the
probe then counts as in contract), or a stated precondition the reference itself ignores.
"""

from __future__ import annotations

from collections.abc import Iterable

from tasksieve.schemas import TaskRecord
from tasksieve.verifiers.families.probes import Differ, ProbeSet
from tasksieve.verifiers.sandbox.base import Sandbox


def probe_set(
    differ: Differ, task: TaskRecord, limit: int, seed: int, sandbox: Sandbox, *, envelope: bool
) -> ProbeSet:
    """At most ``limit`` probes for ``task``, inside its contract where the family models one.

    ``envelope``: also hold inputs mutated from the tests' own to the shape of those inputs
    (the ambiguity check does; the strength check does not, so that weak tests show).
    """
    scoped = getattr(differ, "scoped_probes", None)
    if scoped is not None:
        got = scoped(task, limit, seed, sandbox, envelope=envelope)
        assert isinstance(got, ProbeSet)
        return got
    return ProbeSet(tuple(differ.probes(task, limit, seed)))


def normalised(solution: str) -> str:
    """A solution's text with whitespace runs collapsed: formatting alone is not a new solution."""
    return " ".join(solution.split())


def distinct_solutions(reference: str, solutions: Iterable[str]) -> int:
    """How many different solutions (by ``normalised`` text) other than the reference."""
    ref = normalised(reference)
    return len({normalised(s) for s in solutions} - {ref})
