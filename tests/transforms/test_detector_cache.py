"""Gate and detector outcomes through the rollout cache's ``detectors`` entries: what a key
holds, reports stored and read back unchanged, and a warm re-run that enters no sandbox."""

from __future__ import annotations

import collections
from pathlib import Path
from typing import Any

import pytest

from tasksieve.schemas import TaskRecord
from tasksieve.transforms.reliability import cached
from tasksieve.transforms.reliability.gates import GatesConfig, cached_gates
from tasksieve.transforms.rollouts.cache import detectors
from tasksieve.transforms.rollouts.cache.detectors import DetectorCache, detector_key, settings
from tasksieve.transforms.runtime.items import Item
from tasksieve.verifiers import SandboxConfig
from tasksieve.verifiers.registry import VerifierCache, get_differ
from tasksieve.verifiers.reliability import AmbiguityConfig, StrengthConfig
from tasksieve.verifiers.reliability.ambiguity import AmbiguityReport, Disagreement
from tasksieve.verifiers.reliability.records import (
    ambiguity_from_json,
    cacheable,
    report_to_json,
    strength_from_json,
)
from tasksieve.verifiers.reliability.strength import StrengthReport, Survivor

SANDBOX = SandboxConfig()
MAX3 = "def max3(a, b, c):\n    if a >= b and a >= c:\n        return a\n    return max(b, c)\n"
WRONG = "def max3(a, b, c):\n    return a\n"  # passes the weak tests, disagrees elsewhere
RIGHT = "def max3(a, b, c):\n    return max(a, b, c)\n"
WEAK = TaskRecord(
    id="weak",
    family="code",
    prompt="Write max3(a, b, c): the largest of three integers.",
    reference_solution=MAX3,
    verifier={
        "family": "code",
        "style": "asserts",
        "entry_point": "max3",
        "asserts": [
            "assert max3(9, 1, 2) == 9",
            "assert max3(5, 4, 3) == 5",
            "assert max3(7, 0, 0) == 7",
        ],
    },
)
STRENGTH = StrengthConfig(max_mutants=6, probes=8)
AMBIGUITY = AmbiguityConfig(probes=8)


# ---------------------------------------------------------------------------- keys, records
def test_the_key_follows_what_the_verdict_depends_on_and_nothing_else() -> None:
    sandbox = {"backend": "process", "allow_weak_isolation": False}
    params = settings(STRENGTH)
    key = detector_key("test_strength", WEAK, params, sandbox)
    same = [
        WEAK.model_copy(update={"tags": ["x"], "metadata": {"a": 1}, "source": "elsewhere"}),
    ]
    for task in same:
        assert detector_key("test_strength", task, params, sandbox) == key
    assert detector_key("test_strength", WEAK, settings(StrengthConfig(
        max_mutants=6, probes=8, workers=5)), sandbox) == key  # fmt: skip
    other_tests = WEAK.verifier.model_copy(update={"asserts": ["assert max3(1, 2, 3) == 3"] * 3})
    more = settings(StrengthConfig(max_mutants=7, probes=8))
    retested = WEAK.model_copy(update={"verifier": other_tests})
    rewritten = WEAK.model_copy(update={"reference_solution": RIGHT})
    changed = [
        detector_key("test_strength", retested, params, sandbox),
        detector_key("test_strength", rewritten, params, sandbox),
        detector_key("test_strength", WEAK, more, sandbox),
        detector_key("test_strength", WEAK, params, {**sandbox, "allow_weak_isolation": True}),
        detector_key("ambiguity", WEAK, params, sandbox),
        detector_key("test_strength", WEAK, params, sandbox, inputs=[[0, RIGHT]]),
    ]
    assert len({key, *changed}) == len(changed) + 1


def test_an_edit_of_the_judging_code_misses(monkeypatch: pytest.MonkeyPatch) -> None:
    sandbox = {"backend": "process"}
    key = detector_key("gates", WEAK, {}, sandbox)
    assert len(detectors.code_fingerprint()) == 64
    monkeypatch.setattr(detectors, "code_fingerprint", lambda: "edited")
    assert detector_key("gates", WEAK, {}, sandbox) != key


def test_reports_read_back_equal_and_infra_touched_ones_are_not_kept() -> None:
    s = Survivor("py.compare_flip", "line 2", "-a\n+b", "max3(1, 2, 3)", "3", "1", WRONG, True, "x")
    strength = StrengthReport(3, 1, 1, 1, 0, 0.5, 0.2, (s,), probes=8, unprobed=0)
    assert strength_from_json(report_to_json(strength)) == strength
    d = Disagreement("max3(1, 2, 3)", (("reference", "3"), ("sample 1", "1")), (1,), "why", True)
    amb = AmbiguityReport(8, 7, 6, 2, 0.1, (d,), distinct=1, dropped=1, loose_valid=0)
    assert ambiguity_from_json(report_to_json(amb)) == amb
    assert cacheable(strength) and cacheable(amb)
    assert not cacheable(StrengthReport(3, 1, 0, 0, 2, 1.0, 0.1))
    assert not cacheable(AmbiguityReport(0, 0, 0, 2, 0.1, infra_error="sandbox gone"))
    with pytest.raises(ValueError, match="strength report"):
        strength_from_json({"made": 1})


def test_repo_tasks_are_never_stored(tmp_path: Path) -> None:
    cache = DetectorCache(str(tmp_path), SANDBOX)
    cache.setup()
    repo = WEAK.model_copy(update={"family": "repo"})
    cache.put(repo, "k", {"x": 1})
    assert cache.get("gates", repo, "k") is None
    cache.flush()
    assert not list(tmp_path.rglob("part-*"))


# ---------------------------------------------------------------------------- real sandbox
def _counted(sandbox: Any) -> collections.Counter[str]:
    entries: collections.Counter[str] = collections.Counter()
    for name in ("run", "spawn", "spawn_pair"):
        inner = getattr(sandbox, name)

        def call(*a: Any, _inner: Any = inner, _name: str = name, **k: Any) -> Any:
            entries[_name] += 1
            return _inner(*a, **k)

        setattr(sandbox, name, call)
    return entries


def _measure(cache_dir: str | None) -> tuple[Any, int]:
    """Gates, strength and ambiguity of WEAK in a fresh sandbox; outcomes and entries."""
    sandbox = SANDBOX.make()
    entries = _counted(sandbox)
    verifiers = VerifierCache(sandbox)
    cache = None
    if cache_dir is not None:
        cache = DetectorCache(cache_dir, SANDBOX)
        cache.setup()
    try:
        verifier, differ = verifiers.get("code"), get_differ("code")
        results, reason = cached_gates(cache, Item(WEAK, "t", 1, "sha"), verifier, GatesConfig())
        strength = cached.strength(cache, WEAK, verifier, differ, sandbox, STRENGTH)
        passing = [(0, WRONG), (1, RIGHT)]
        amb = cached.ambiguity(cache, WEAK, passing, differ, sandbox, AMBIGUITY)
    finally:
        if cache is not None:
            cache.flush()
        verifiers.close()
        sandbox.close()
    gates = [(r.gate, r.passed, r.detail) for r in results]
    plain = [
        {k: v for k, v in report_to_json(r).items() if k != "duration_s"} for r in (strength, amb)
    ]
    return (gates, reason, plain), sum(entries.values())  # fmt: skip


@pytest.mark.slow
def test_a_warm_rerun_gives_the_same_outcomes_without_entering_the_sandbox(
    tmp_path: Path,
) -> None:
    uncached, n_uncached = _measure(None)
    cold, n_cold = _measure(str(tmp_path))
    warm, n_warm = _measure(str(tmp_path))
    assert uncached == cold == warm
    assert uncached[1] == "" and uncached[2][0]["survived"] >= 1  # weak tests, measured
    assert n_cold == n_uncached > 0
    assert n_warm == 0
