"""The reason-code registry covers every code the stages write."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tasksieve.transforms.reasons import FAMILIES, REASONS, is_known

TRANSFORMS = Path(__file__).resolve().parents[2] / "transforms"
STAGES = (
    "ingest",
    "validate",
    "dedup",
    "decontam",
    "verifier",
    "gate",
    "rollouts",
    "verify",
    "filter",
)
# A code in quotes, not a counter name (``count("rollouts.sampled")``).
_STAGE = "(?:" + "|".join(STAGES) + ")"
LITERAL = re.compile(r"""(?<!count\()["'](""" + _STAGE + r"""\.[a-z_]+)["']""")
FSTRING = re.compile(r"""(?<!count\()f["'](""" + _STAGE + r"""\.)\{""")


# Rooms that write no rejected records: synth/ names record fields ("verifier.snapshot").
NOT_STAGES = ("synth",)


def _sources() -> str:
    files = sorted(TRANSFORMS.rglob("*.py"))
    stage_files = [p for p in files if p.relative_to(TRANSFORMS).parts[0] not in NOT_STAGES]
    return "\n".join(p.read_text() for p in stage_files)


def test_every_literal_code_in_the_stages_is_registered() -> None:
    codes = set(LITERAL.findall(_sources()))
    assert codes, "found no reason codes: the scan is broken"
    assert sorted(codes - REASONS) == []


def test_every_formatted_code_has_a_registered_family_or_codes() -> None:
    prefixes = set(FSTRING.findall(_sources()))
    assert prefixes
    for prefix in prefixes:
        assert prefix in FAMILIES or any(r.startswith(prefix) for r in REASONS), prefix


@pytest.mark.parametrize(
    ("reason", "known"),
    [
        ("gate.reference_failed", True),
        ("decontam.humaneval", True),
        ("decontam.my-bench_v2", True),
        ("decontam.", False),
        ("gate.reference_failed ", False),
        ("gate.made_up", False),
        ("", False),
        ("filter.too_hard\nx", False),
    ],
)
def test_is_known(reason: str, known: bool) -> None:
    assert is_known(reason) is known
