"""Test strength: how many mutants of the reference a task's own tests kill.

- ``measure_strength``: mutate the reference (the family's ``Differ.mutants``), judge every
  mutant with the task's own verifier, and observe each mutant the tests did not kill against
  the reference on extra inputs (``Differ.probes``). A mutant that answers differently on some
  valid probe *survived* (the tests let a wrong program through); one that agrees on every
  valid probe is *equivalent* and left out. Score = killed / (killed + survived).
  Probes come from ``contract.probe_set`` without the tests' envelope: inside the stated
  preconditions and the task's ``input_domain``, but free to leave the shape of the tests'
  own inputs (that is where weak tests show), convention probes included.

A broken environment never looks like weak tests: a mutant whose verdict is ``infra_error``
is judged once more and, if that fails too, counted apart (``infra_errors``), neither killed
nor survived; a ``ProbeInfraError`` while observing leaves the affected mutants undecided the
same way, and the report's ``infra_error`` says so.

It does NOT catch: weaknesses no mutation operator models (a surviving mutant proves weak
tests; none surviving proves nothing), differences that only show on inputs the probe
generator never makes, or "surviving" mutants that differ only on inputs outside a contract
the statement does not state in a form ``python.contract`` reads (the threshold leaves room).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from tasksieve.schemas import TaskRecord, Verdict
from tasksieve.verifiers.families.base import Verifier
from tasksieve.verifiers.families.probes import Differ, Mutant, Observation, Probe, ProbeInfraError
from tasksieve.verifiers.reliability.contract import probe_set
from tasksieve.verifiers.reliability.evidence import Evidence, short, show
from tasksieve.verifiers.reliability.shared import observe as observe_shared
from tasksieve.verifiers.sandbox.base import Sandbox


# ---------------------------------------------------------------------------- test strength
@dataclass(frozen=True)
class StrengthConfig:
    """How test strength is measured, and the lowest mutation score a task may keep.

    ``min_score`` in [0, 1] (a task below it is ``gate.weak_tests``); ``max_mutants`` mutants
    at most per task; ``probes`` extra inputs tried on each surviving mutant; ``workers``
    mutants judged at the same time; ``seed`` makes mutant and probe choice repeatable.
    """

    enabled: bool = True
    min_score: float = 0.8
    tolerated: int = 0
    max_mutants: int = 16
    probes: int = 24
    workers: int = 2
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0.0 <= self.min_score <= 1.0:
            raise ValueError(
                f"min_score must be in [0, 1] (a mutation score), got {self.min_score}"
            )
        if self.tolerated < 0:
            raise ValueError(
                f"need tolerated >= 0 (typical survivors allowed), got {self.tolerated}"
            )
        if self.max_mutants < 1:
            raise ValueError(
                f"need max_mutants >= 1, got {self.max_mutants} (turn the check off instead)"
            )
        if self.probes < 1:
            raise ValueError(f"need probes >= 1, got {self.probes}")
        if self.workers < 1:
            raise ValueError(f"need workers >= 1, got {self.workers}")


@dataclass(frozen=True)
class Survivor:
    """A mutant the tests passed that answers differently from the reference on ``probe``."""

    operator: str
    where: str
    diff: str
    probe: str
    reference_output: str
    mutant_output: str
    solution: str = ""  # the whole mutant (not stored in columns; the diff is)
    typical: bool = False
    why: str = ""

    def describe(self) -> str:
        """One paragraph of evidence: the change, the input and both outputs."""
        scope = f" (in contract: {self.why})" if self.why else ""
        return (
            f"{self.operator} at {self.where} survives; on {self.probe}{scope} the reference gives "
            f"{self.reference_output} but the mutant gives {self.mutant_output}\n{self.diff}"
        )


@dataclass(frozen=True)
class StrengthReport:
    """What ``measure_strength`` found for one task.

    ``score`` is killed / (killed + survived); None when no mutant was decided either way
    (none made, or all equivalent or undecided): a task with no evidence is not called weak.
    ``unprobed``: mutants the tests let through but that no valid probe could compare with
    the reference (no probe made, or the reference failed on every one); like equivalent
    ones they stay out of the score, and are reported apart. So do ``open_convention`` ones:
    they differ only on convention probes where the statement leaves the convention open
    (another reading of the statement, which the ambiguity check judges, not a bug).
    """

    made: int
    killed: int
    survived: int
    equivalent: int
    infra_errors: int
    score: float | None
    duration_s: float
    survivors: tuple[Survivor, ...] = ()
    probes: int = 0
    infra_error: str = ""
    unprobed: int = 0
    open_convention: int = 0

    @property
    def typical(self) -> int:
        """Survivors that differ on an input shaped like the tests' own and inside the contract."""
        return sum(s.typical for s in self.survivors)

    def weak(self, cfg: StrengthConfig) -> bool:
        """Whether the tests are too weak to keep the task (never without a measured score):
        the score is below ``min_score``, or more than ``tolerated`` survivors are typical."""
        return self.score is not None and (
            self.score < cfg.min_score or self.typical > cfg.tolerated
        )

    def summary(self) -> str:
        """``killed 3 of 5 mutants (score 0.60); 2 survived, 1 equivalent``."""
        score = "n/a" if self.score is None else f"{self.score:.2f}"
        text = (
            f"killed {self.killed} of {self.made} mutants (score {score}); "
            f"{self.survived} survived, {self.equivalent} equivalent"
        )
        if self.typical:
            text += f" ({self.typical} on inputs like the tests' own)"
        if self.open_convention:
            text += (
                f", {self.open_convention} differ only where the statement leaves a convention open"
            )
        if self.unprobed:
            text += f", {self.unprobed} not compared (no valid probe)"
        if self.infra_errors:
            text += f", {self.infra_errors} undecided (infra errors)"
        return text


def _judge(verifier: Verifier, task: TaskRecord, mutant: Mutant) -> Verdict:
    """The verifier's verdict on a mutant, judged once more after an infra error."""
    v = verifier.verify(task, mutant.solution)
    if v.status == "infra_error":
        v = verifier.verify(task, mutant.solution)
    return v


def first_difference(
    differ: Differ,
    task: TaskRecord,
    probes: Sequence[Probe],
    reference: Sequence[Observation],
    other: Sequence[Observation],
) -> int | None:
    """The index of the first valid probe (reference ok) where ``other`` disagrees, or None.

    A probe left unobserved for ``other`` (``Observation.not_run``) is skipped."""
    for j, (ref, obs) in enumerate(zip(reference, other, strict=True)):
        if ref.ok and obs.observed and not differ.agree(task, ref, obs):
            return j
    return None


def differences(
    differ: Differ, task: TaskRecord, reference: Sequence[Observation], other: Sequence[Observation]
) -> list[int]:
    """Indices of every valid probe (reference ok) where ``other`` was observed and disagrees."""
    return [
        j
        for j, (ref, obs) in enumerate(zip(reference, other, strict=True))
        if ref.ok and obs.observed and not differ.agree(task, ref, obs)
    ]


def measure_strength(
    task: TaskRecord,
    verifier: Verifier,
    differ: Differ,
    sandbox: Sandbox,
    cfg: StrengthConfig,
) -> StrengthReport:
    """Mutation score of the task's own tests (see the module docstring).

    The verifier should know the reference's runtime (``Verifier.calibrate``) so that a mutant
    that loops is stopped after a multiple of it rather than the task's whole time limit.
    """
    t0 = time.monotonic()
    mutants = differ.mutants(task, cfg.max_mutants, cfg.seed)[: cfg.max_mutants]
    with ThreadPoolExecutor(max_workers=cfg.workers) as pool:
        verdicts = list(pool.map(lambda m: _judge(verifier, task, m), mutants))
    infra = sum(v.status == "infra_error" for v in verdicts)
    killed = sum(v.status not in ("pass", "infra_error") for v in verdicts)
    passed = [m for m, v in zip(mutants, verdicts, strict=True) if v.status == "pass"]
    survivors: list[Survivor] = []
    equivalent = unprobed = open_convention = 0
    n_probes = 0
    infra_error = ""
    if passed:
        probes: list[Probe] = []
        try:
            scope = probe_set(differ, task, cfg.probes, cfg.seed, sandbox, envelope=False)
            probes = list(scope.probes)
            n_probes = len(probes)
            seen = observe_shared(differ, task, [m.solution for m in passed], probes, sandbox)
        except ProbeInfraError as e:
            infra_error = f"observing mutants failed: {e}"
            infra += len(passed)
            passed = []
            seen = []
        for i, m in enumerate(passed, start=1):
            diffs = differences(differ, task, seen[0], seen[i])
            plain = [j for j in diffs if probes[j].origin != "convention"]
            if diffs and not plain:
                open_convention += 1
                continue
            j = next((k for k in plain if probes[k].typical), plain[0] if plain else None)
            if j is None:
                compared = any(r.ok and o.observed for r, o in zip(seen[0], seen[i], strict=True))
                if compared:
                    equivalent += 1
                else:
                    unprobed += 1
                continue
            survivors.append(
                Survivor(
                    operator=m.operator,
                    where=m.where,
                    diff=m.diff(task.reference_solution),
                    probe=short(probes[j].label, 200),
                    reference_output=show(seen[0][j]),
                    mutant_output=show(seen[i][j]),
                    solution=m.solution,
                    typical=probes[j].typical,
                    why=probes[j].why,
                )
            )
    decided = killed + len(survivors)
    return StrengthReport(
        made=len(mutants),
        killed=killed,
        survived=len(survivors),
        equivalent=equivalent,
        infra_errors=infra,
        score=killed / decided if decided else None,
        duration_s=time.monotonic() - t0,
        survivors=tuple(survivors),
        probes=n_probes,
        infra_error=infra_error,
        unprobed=unprobed,
        open_convention=open_convention,
    )


def strength_evidence(report: StrengthReport, cfg: StrengthConfig) -> str:
    """The detail of a ``gate.weak_tests`` rejection: the score and the surviving mutants
    (those on inputs shaped like the tests' own first)."""
    if report.score is not None and report.score < cfg.min_score:
        head = f"mutation score below {cfg.min_score}: {report.summary()}"
    else:
        head = (
            f"more than {cfg.tolerated} mutants survive on inputs like the tests' own, inside "
            f"the task's contract: {report.summary()}"
        )
    ordered = sorted(report.survivors, key=lambda s: not s.typical)
    return Evidence(head, [s.describe() for s in ordered[:3]]).text()
