"""Reports as plain JSON data and back, for storing them by content (the rollout cache's
``detectors`` entries): ``report_to_json`` and ``strength_from_json``/``ambiguity_from_json``.

``cacheable`` says whether a report may be stored at all: one that an infra error touched
says nothing lasting about the task and is measured again next run.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from tasksieve.verifiers.reliability.ambiguity import AmbiguityReport, Disagreement
from tasksieve.verifiers.reliability.strength import StrengthReport, Survivor


def report_to_json(report: StrengthReport | AmbiguityReport) -> dict[str, Any]:
    """Every field of ``report`` as JSON-ready data (tuples become lists)."""
    return dataclasses.asdict(report)


def strength_from_json(data: dict[str, Any]) -> StrengthReport:
    """The ``StrengthReport`` that ``report_to_json`` wrote (raises ValueError if malformed)."""
    try:
        fields = dict(data)
        fields["survivors"] = tuple(Survivor(**s) for s in fields.get("survivors", ()))
        return StrengthReport(**fields)
    except (TypeError, AttributeError) as e:
        raise ValueError(f"not a stored strength report: {e}") from e


def ambiguity_from_json(data: dict[str, Any]) -> AmbiguityReport:
    """The ``AmbiguityReport`` that ``report_to_json`` wrote (raises ValueError if malformed)."""
    try:
        fields = dict(data)
        fields["disagreements"] = tuple(
            Disagreement(
                probe=d["probe"],
                outputs=tuple((str(who), str(what)) for who, what in d["outputs"]),
                samples=tuple(int(s) for s in d["samples"]),
                why=d.get("why", ""),
                contracted=bool(d.get("contracted", False)),
            )
            for d in fields.get("disagreements", ())
        )
        return AmbiguityReport(**fields)
    except (TypeError, KeyError, AttributeError) as e:
        raise ValueError(f"not a stored ambiguity report: {e}") from e


def cacheable(report: StrengthReport | AmbiguityReport) -> bool:
    """Whether ``report`` may be stored: no infra error touched it."""
    if isinstance(report, StrengthReport):
        return not report.infra_errors and not report.infra_error
    return not report.infra_error
