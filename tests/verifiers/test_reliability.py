"""Test strength and ambiguity on real code tasks, with the Python differ and the process
sandbox."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tasksieve.schemas import TaskRecord
from tasksieve.verifiers.families.probes import Observation, Probe
from tasksieve.verifiers.families.python.differ import PythonDiffer
from tasksieve.verifiers.families.python.verifier import PythonVerifier
from tasksieve.verifiers.reliability import (
    AmbiguityConfig,
    AmbiguityReport,
    StrengthConfig,
    StrengthReport,
    measure_ambiguity,
    measure_strength,
    strength_evidence,
)
from tasksieve.verifiers.sandbox.base import Execution, Limits, Sandbox
from tasksieve.verifiers.sandbox.process.sandbox import ProcessSandbox

ADULT = "def is_adult(age):\n    return age >= 18\n"
MIDDLE = "def middle(xs):\n    return xs[len(xs) // 2]\n"
MIDDLE_LOW = "def middle(xs):\n    return xs[(len(xs) - 1) // 2]\n"


def code_task(
    ref: str, entry: str, asserts: list[str], task_id: str = "t", **spec: Any
) -> TaskRecord:
    return TaskRecord(
        id=task_id,
        family="code",
        prompt=f"Write {entry}.",
        reference_solution=ref,
        verifier={
            "family": "code",
            "style": "asserts",
            "entry_point": entry,
            "asserts": asserts,
            **spec,
        },
    )


WEAK = code_task(
    ADULT,
    "is_adult",
    ["assert is_adult(30) is True", "assert is_adult(10) is False", "assert is_adult(60)"],
    probe_inputs=["18", "17"],
)
STRONG = code_task(
    ADULT,
    "is_adult",
    ["assert is_adult(18) is True", "assert is_adult(17) is False", "assert is_adult(40)"],
)
MIDDLE_TASK = code_task(
    MIDDLE,
    "middle",
    ["assert middle([1, 2, 3]) == 2", "assert middle([7]) == 7", "assert middle([4, 5, 6]) == 5"],
)
CFG = StrengthConfig(max_mutants=8, probes=8, workers=2)


def strength(task: TaskRecord, verifier: PythonVerifier, sandbox: ProcessSandbox) -> StrengthReport:
    return measure_strength(task, verifier, PythonDiffer(), sandbox, CFG)


def test_weak_tests_have_a_surviving_mutant_as_evidence(
    verifier: PythonVerifier, sandbox: ProcessSandbox
) -> None:
    rep = strength(WEAK, verifier, sandbox)
    assert rep.survived >= 1 and rep.weak(CFG)
    boundary = [s for s in rep.survivors if s.operator == "py.compare_boundary"]
    assert boundary and boundary[0].probe == "is_adult(18)"
    assert (boundary[0].reference_output, boundary[0].mutant_output) == ("true", "false")
    assert "-    return age >= 18" in strength_evidence(rep, CFG)


def test_strong_tests_kill_every_mutant(verifier: PythonVerifier, sandbox: ProcessSandbox) -> None:
    rep = strength(STRONG, verifier, sandbox)
    assert rep.made >= 3 and rep.survived == 0 and rep.score == 1.0
    assert not rep.weak(CFG)


def test_an_equivalent_mutant_is_not_counted_as_surviving(
    verifier: PythonVerifier, sandbox: ProcessSandbox
) -> None:
    ref = "def absval(x):\n    if x < 0:\n        return -x\n    return x\n"
    task = code_task(ref, "absval", ["assert absval(-3) == 3", "assert absval(4) == 4"])
    rep = strength(task, verifier, sandbox)
    assert rep.equivalent >= 1  # x <= 0 answers -0 == 0 at zero: the same everywhere
    assert not any(s.where.endswith("< to <=") for s in rep.survivors)
    assert rep.killed + rep.survived + rep.equivalent + rep.infra_errors == rep.made
    assert rep.unprobed == 0


def test_a_mutant_no_probe_can_compare_is_unprobed_not_equivalent(
    verifier: PythonVerifier, sandbox: ProcessSandbox
) -> None:
    test = "def check(c):\n    for x in range(3):\n        assert c(x) is (x >= 1)\n"
    task = TaskRecord(
        id="loop",
        family="code",
        prompt="p",
        reference_solution="def pos(x):\n    return x >= 1 or x > 99\n",
        verifier={"family": "code", "style": "check", "entry_point": "pos", "test_code": test},
    )
    rep = strength(task, verifier, sandbox)
    assert rep.probes == 0  # the tests' only call has a computed argument
    assert rep.unprobed >= 1 and rep.equivalent == 0 and rep.survived == 0


def test_no_mutant_gives_no_score_and_is_not_weak(
    verifier: PythonVerifier, sandbox: ProcessSandbox
) -> None:
    task = code_task("def name():\n    return 'x'\n", "name", ["assert name() == 'x'"] * 3)
    rep = strength(task, verifier, sandbox)
    assert rep.made >= 1 and rep.score == 1.0  # return None / dropped return: both killed
    empty = code_task("name = lambda: 'x'\n", "name", ["assert name() == 'x'"] * 3)
    rep = strength(empty, verifier, sandbox)
    assert (rep.made, rep.score) == (0, None) and not rep.weak(CFG)


def test_two_readings_that_pass_the_tests_are_ambiguous(sandbox: ProcessSandbox) -> None:
    cfg = AmbiguityConfig(probes=12)
    rep = measure_ambiguity(
        MIDDLE_TASK, [(0, MIDDLE), (2, MIDDLE_LOW), (3, MIDDLE)], PythonDiffer(), sandbox, cfg
    )
    assert rep.ambiguous(cfg) and rep.valid >= cfg.min_valid
    first = rep.disagreements[0]
    assert first.samples == (2,)
    assert dict(first.outputs).keys() == {"reference", "sample 2"}


def test_the_reference_twin_alone_is_not_ambiguous(sandbox: ProcessSandbox) -> None:
    twin = "def middle(xs):\n    n = len(xs)\n    return xs[n // 2]\n"
    rep = measure_ambiguity(MIDDLE_TASK, [(1, twin)], PythonDiffer(), sandbox, AmbiguityConfig())
    assert rep.tried > 0 and rep.agreed == rep.valid and not rep.disagreements


def test_probes_where_the_reference_fails_are_invalid(sandbox: ProcessSandbox) -> None:
    # every derived input includes [] sooner or later; the reference raises IndexError there
    task = code_task(MIDDLE, "middle", ["assert middle([1, 2, 3]) == 2"], probe_inputs=["[]"])
    rep = measure_ambiguity(
        task, [(0, MIDDLE_LOW)], PythonDiffer(), sandbox, AmbiguityConfig(probes=6)
    )
    assert rep.valid < rep.tried


@pytest.mark.parametrize(
    ("tried", "valid", "agreed", "ambiguous"),
    [(24, 20, 20, False), (24, 20, 18, False), (24, 20, 17, True), (24, 2, 0, False)],
)
def test_threshold_and_minimum_valid(tried: int, valid: int, agreed: int, ambiguous: bool) -> None:
    from tasksieve.verifiers.reliability import Disagreement

    odd = tuple(Disagreement("p", (("reference", "1"),), (0,)) for _ in range(valid - agreed))
    rep = AmbiguityReport(tried, valid, agreed, 2, 0.0, odd)
    assert rep.ambiguous(AmbiguityConfig(threshold=0.1)) is ambiguous


HOSTILE = {
    "writes_host_file_at_load": "open({marker!r}, 'w').write('x')\n" + MIDDLE,
    "writes_host_file_in_call": "def middle(xs):\n    open({marker!r}, 'w').write('x')\n",
    "kills_its_parent": "import os\ndef middle(xs):\n    os.kill(os.getppid(), 9)\n",
    "forges_protocol_lines": "import os\ndef middle(xs):\n"
    "    for fd in range(3, 9):\n"
    "        try:\n            os.write(fd, b'{{\"ok\": 1}}\\n')\n"
    "        except OSError:\n            pass\n    return xs[0]\n",
    "fork_bomb": "import os\ndef middle(xs):\n    while True:\n        os.fork()\n",
    "loops_forever": "def middle(xs):\n    while True:\n        pass\n",
}


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_hostile_solutions_are_observed_in_the_sandbox(
    kind: str, sandbox: ProcessSandbox, tmp_path: Path
) -> None:
    marker = tmp_path / "marker"
    hostile = HOSTILE[kind].format(marker=str(marker))
    d = PythonDiffer()
    probes = d.probes(MIDDLE_TASK, 3, 0)
    seen = d.observe(MIDDLE_TASK, [MIDDLE, hostile, MIDDLE], probes, sandbox)
    assert not marker.exists()  # the code never ran on this machine's filesystem
    assert len(seen) == 3 and all(len(row) == len(probes) for row in seen)
    alone = d.observe(MIDDLE_TASK, [MIDDLE], probes, sandbox)[0]
    assert seen[0] == seen[2] == alone  # the others' answers are untouched


def test_a_looping_solution_is_stopped_and_then_skipped(sandbox: ProcessSandbox) -> None:
    d = PythonDiffer()
    probes = d.probes(MIDDLE_TASK, 4, 0)
    (row,) = d.observe(MIDDLE_TASK, [HOSTILE["loops_forever"]], probes, sandbox)
    assert [o.value for o in row[:2]] == ["limit:wall", "limit:wall"]
    assert row[2:] == [Observation.not_run()] * 2 and not row[2].observed


def test_agree_compares_values_as_the_tests_would() -> None:
    d = PythonDiffer()
    ok = Observation.of
    assert d.agree(MIDDLE_TASK, ok(1.0), ok(1.0000000001))
    assert d.agree(MIDDLE_TASK, ok({"$s": [1, 2]}), ok({"$s": [1, 2]}))
    assert not d.agree(MIDDLE_TASK, ok([1, 2]), ok({"$t": [1, 2]}))
    assert not d.agree(MIDDLE_TASK, ok(1), Observation(False, "ValueError"))
    assert d.agree(MIDDLE_TASK, Observation(False, "KeyError"), Observation(False, "KeyError"))


def test_probes_skip_the_tests_own_inputs() -> None:
    probes: list[Probe] = PythonDiffer().probes(STRONG, 20, 0)
    labels = {p.label for p in probes}
    assert labels and labels.isdisjoint({"is_adult(18)", "is_adult(17)", "is_adult(40)"})
    assert len(labels) == len(probes)


class BrokenSandbox(Sandbox):
    """A sandbox whose every run fails to start: the environment is broken, not the code."""

    name = "broken"

    def run(
        self,
        files: dict[str, bytes | str],
        command: list[str],
        limits: Limits,
        stdin: bytes = b"",
        collect: tuple[str, ...] = (),
    ) -> Execution:
        return Execution(None, b"", b"", 0.0, infra_error="sandbox start failed: test")


def test_a_broken_environment_never_looks_like_weak_tests() -> None:
    box = BrokenSandbox()
    try:
        rep = measure_strength(WEAK, PythonVerifier(box), PythonDiffer(), box, CFG)
    finally:
        box.close()
    assert rep.made >= 3 and rep.infra_errors == rep.made
    assert (rep.killed, rep.survived, rep.score) == (0, 0, None) and not rep.weak(CFG)
    assert rep.summary().endswith(f"{rep.made} undecided (infra errors)")


def test_an_observation_infra_error_is_reported_not_ambiguous() -> None:
    box = BrokenSandbox()
    try:
        cfg = AmbiguityConfig()
        rep = measure_ambiguity(MIDDLE_TASK, [(0, MIDDLE_LOW)], PythonDiffer(), box, cfg)
    finally:
        box.close()
    assert rep.infra_error and not rep.ambiguous(AmbiguityConfig())
