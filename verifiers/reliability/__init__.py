"""Evaluation reliability: how strong a task's tests are, and whether its statement is ambiguous.

Two plain functions the pipeline stages, the sandbox service and the trainer share:
``measure_strength`` (``strength``: mutants of the reference against the task's own tests)
and ``measure_ambiguity`` (``ambiguity``: passing solutions against each other on extra
inputs). Both take their extra inputs from ``contract.probe_set``: probes inside what the task
allows (the statement's stated preconditions, the task's ``input_domain``, the shape of the
tests' own inputs), each with the reason it is in contract. ``evidence`` turns reports into
rejection details.
"""

from tasksieve.verifiers.reliability.ambiguity import (
    OUTCOMES,
    AmbiguityConfig,
    AmbiguityReport,
    Disagreement,
    ambiguity_evidence,
    measure_ambiguity,
)
from tasksieve.verifiers.reliability.contract import distinct_solutions, probe_set
from tasksieve.verifiers.reliability.evidence import Evidence
from tasksieve.verifiers.reliability.strength import (
    StrengthConfig,
    StrengthReport,
    Survivor,
    first_difference,
    measure_strength,
    strength_evidence,
)

__all__ = [
    "OUTCOMES",
    "AmbiguityConfig",
    "AmbiguityReport",
    "Disagreement",
    "Evidence",
    "StrengthConfig",
    "StrengthReport",
    "Survivor",
    "ambiguity_evidence",
    "distinct_solutions",
    "first_difference",
    "measure_ambiguity",
    "measure_strength",
    "probe_set",
    "strength_evidence",
]
