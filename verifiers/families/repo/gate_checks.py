"""What the gates check of a repo task, as plain functions of its verdicts.

- the reference's runs report every asked id (an id that is missing or did not collect names
  a test that does not exist: ``repo.tests_missing``);
- a test whose outcome differs between the reference's runs is flaky (named);
- the empty patch fails *every* ``fail_to_pass`` test (``repo.fail_to_pass_passes_before``)
  and passes every ``pass_to_pass`` test (``repo.pass_to_pass_fails_before``).
"""

from __future__ import annotations

from collections.abc import Sequence

from tasksieve.schemas import Verdict
from tasksieve.verifiers.families.repo.verifier import not_found_ids


def _ids(verdict: Verdict, prefix: str, outcomes: tuple[str, ...]) -> list[str]:
    return [
        c.name.split(":", 1)[1]
        for c in verdict.checks
        if c.name.startswith(prefix) and c.detail in outcomes
    ]


def missing_tests(verdict: Verdict) -> list[str]:
    """Asked ids the run never reported or could not collect; pytest's own "not found" ids
    first when it named some (one unknown id stops pytest from running any)."""
    named = not_found_ids(verdict.detail)
    if named:
        return named
    return _ids(verdict, "", ("missing", "error"))


def flaky_tests(verdicts: Sequence[Verdict]) -> list[str]:
    """Checks whose outcome differs between runs (``fail_to_pass:<id>`` names)."""
    seen: dict[str, set[str]] = {}
    for v in verdicts:
        for c in v.checks:
            seen.setdefault(c.name, set()).add(c.detail)
    return sorted(name for name, outs in seen.items() if len(outs) > 1)


def empty_patch_problem(verdict: Verdict) -> tuple[str, str] | None:
    """(reason, detail) when the empty patch's verdict breaks the task, else None."""
    passing = [
        c.name.split(":", 1)[1]
        for c in verdict.checks
        if c.name.startswith("fail_to_pass:") and c.passed
    ]
    if passing:
        return (
            "repo.fail_to_pass_passes_before",
            f"fail_to_pass tests pass without any change: {', '.join(passing[:10])}; "
            "move them to pass_to_pass or fix the snapshot",
        )
    broken = [f"{i} ({o})" for i, o in _pairs(verdict, "pass_to_pass:") if o != "passed"]
    if broken:
        return (
            "repo.pass_to_pass_fails_before",
            f"pass_to_pass tests do not pass on the snapshot: {', '.join(broken[:10])}; "
            "drop them or fix the environment",
        )
    return None


def _pairs(verdict: Verdict, prefix: str) -> list[tuple[str, str]]:
    return [(c.name[len(prefix) :], c.detail) for c in verdict.checks if c.name.startswith(prefix)]
