"""The registry of rejection reason codes every stage may write into ``rejected/``.

Stages spell their codes where they reject (``reason="gate.reference_failed"``); this module is
the one list of them, used by the data-quality checks to refuse unknown codes in an output.
``tests/transforms/test_reasons.py`` scans the stages' source for reason literals and fails when
one is missing here, so a new code cannot ship without being registered. It does NOT check that
every registered code is still produced somewhere (a retired code stays valid for old outputs).
"""

from __future__ import annotations

import re

STAGES: tuple[str, ...] = (
    "ingest",
    "validate",
    "exact_dedup",
    "near_dedup",
    "decontaminate",
    "gates",
    "test_strength",
    "rollouts",
    "verify",
    "ambiguity",
    "filter",
)
"""The stages in the order records pass them (pipeline/curate/build.py): ``rejected.stage``."""

GUARDED: tuple[str, ...] = STAGES[1:]
"""The stages whose per-record steps are dead-lettered; Ingest reads files, and a file it
cannot read ends as ``ingest.unreadable_file`` instead."""

ERRORS: frozenset[str] = frozenset(f"{stage}.error" for stage in GUARDED)
"""``<stage>.error``: the stage raised on the record (``transforms.runtime.deadletter``); the detail
holds the exception and the innermost frames of its traceback."""


def error_reason(stage: str) -> str:
    """The code of a record on which ``stage`` raised: ``<stage>.error``."""
    if stage not in GUARDED:
        raise ValueError(
            f"unknown stage {stage!r} for an error code; stages are {', '.join(GUARDED)}"
        )
    return f"{stage}.error"


REASONS: frozenset[str] = frozenset(
    {
        "ingest.unreadable_file",
        "validate.parse_error",
        "validate.schema",
        "validate.duplicate_id",
        "dedup.exact",
        "dedup.conflict",
        "dedup.near",
        "dedup.index",
        "verifier.unsupported",
        "gate.too_few_tests",
        "gate.reference_failed",
        "gate.reference_flaky",
        "gate.trivial_passes",
        "gate.infra_error",
        "gate.weak_tests",
        "repo.snapshot",
        "repo.environment",
        "repo.too_large",
        "repo.tests_missing",
        "repo.fail_to_pass_passes_before",
        "repo.pass_to_pass_fails_before",
        "rollouts.no_samples",
        "rollouts.sampler_error",
        "rollouts.turn_missing",
        "verify.infra_error",
        "filter.too_easy",
        "filter.too_hard",
        "filter.ambiguous",
    }
    | ERRORS
)
"""Fixed codes."""

FAMILIES: tuple[str, ...] = ("decontam.",)
"""Prefixes of codes whose tail names something the run was given (``decontam.<benchmark>``)."""

_TAIL = r"\S+"


def reason_regex() -> str:
    """A regular expression that matches exactly the known codes (whole string)."""
    fixed = "|".join(re.escape(r) for r in sorted(REASONS))
    families = "|".join(re.escape(p) + _TAIL for p in FAMILIES)
    return rf"^(?:{fixed}|{families})$"


def is_known(reason: str) -> bool:
    """Whether ``reason`` is a registered code (or a registered family's code)."""
    return re.fullmatch(reason_regex(), reason) is not None
