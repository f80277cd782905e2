"""Evaluation reliability: how strong a task's tests are, and whether its statement is ambiguous.

Two plain functions the pipeline stages, the sandbox service and the trainer share:

- ``measure_strength``: mutate the reference (the family's ``Differ.mutants``), judge every
  mutant with the task's own verifier, and observe each mutant the tests did not kill against
  the reference on extra inputs (``Differ.probes``). A mutant that answers differently on some
  valid probe *survived* (the tests let a wrong program through); one that agrees on every
  valid probe is *equivalent* and left out. Score = killed / (killed + survived).
- ``measure_ambiguity``: observe the reference and every passing solution on the probes;
  probes where the reference fails are invalid and dropped; a valid probe where some passing
  solution disagrees with the reference (or with another passing solution) is a disagreement.
  The task is ambiguous when the disagreeing share of valid probes exceeds the threshold.

A broken environment never looks like weak tests: a mutant whose verdict is ``infra_error``
is judged once more and, if that fails too, counted apart (``infra_errors``), neither killed
nor survived; a ``ProbeInfraError`` while observing leaves the affected mutants undecided the
same way, and the report's ``infra_error`` says so.

It does NOT catch: weaknesses no mutation operator models (a surviving mutant proves weak
tests; none surviving proves nothing), differences that only show on inputs the probe
generator never makes, or "surviving" mutants that differ only on inputs outside the task's
contract (a probe may violate an unstated precondition; the thresholds leave room for that).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from tasksieve.schemas import TaskRecord, Verdict
from tasksieve.verifiers.families.base import Verifier
from tasksieve.verifiers.families.probes import Differ, Mutant, Observation, Probe, ProbeInfraError
from tasksieve.verifiers.sandbox.base import Sandbox

_SHOWN = 300  # characters of one output kept in evidence


def _short(text: str, limit: int = _SHOWN) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


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
    max_mutants: int = 16
    probes: int = 24
    workers: int = 2
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0.0 <= self.min_score <= 1.0:
            raise ValueError(
                f"min_score must be in [0, 1] (a mutation score), got {self.min_score}"
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

    def describe(self) -> str:
        """One paragraph of evidence: the change, the input and both outputs."""
        return (
            f"{self.operator} at {self.where} survives; on {self.probe} the reference gives "
            f"{self.reference_output} but the mutant gives {self.mutant_output}\n{self.diff}"
        )


@dataclass(frozen=True)
class StrengthReport:
    """What ``measure_strength`` found for one task.

    ``score`` is killed / (killed + survived); None when no mutant was decided either way
    (none made, or all equivalent or undecided): a task with no evidence is not called weak.
    ``unprobed``: mutants the tests let through but that no valid probe could compare with
    the reference (no probe made, or the reference failed on every one); like equivalent
    ones they stay out of the score, and are reported apart.
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

    def weak(self, cfg: StrengthConfig) -> bool:
        """Whether the tests are too weak to keep the task (never without a measured score)."""
        return self.score is not None and self.score < cfg.min_score

    def summary(self) -> str:
        """``killed 3 of 5 mutants (score 0.60); 2 survived, 1 equivalent``."""
        score = "n/a" if self.score is None else f"{self.score:.2f}"
        text = (
            f"killed {self.killed} of {self.made} mutants (score {score}); "
            f"{self.survived} survived, {self.equivalent} equivalent"
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


def _show(obs: Observation) -> str:
    return _short(obs.value if obs.ok else f"raises {obs.value}")


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
    equivalent = unprobed = 0
    n_probes = 0
    infra_error = ""
    if passed:
        probes = differ.probes(task, cfg.probes, cfg.seed)
        n_probes = len(probes)
        try:
            seen = differ.observe(
                task, [task.reference_solution, *(m.solution for m in passed)], probes, sandbox
            )
        except ProbeInfraError as e:
            infra_error = f"observing mutants failed: {e}"
            infra += len(passed)
            passed = []
            seen = []
        for i, m in enumerate(passed, start=1):
            j = first_difference(differ, task, probes, seen[0], seen[i])
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
                    probe=_short(probes[j].label, 200),
                    reference_output=_show(seen[0][j]),
                    mutant_output=_show(seen[i][j]),
                    solution=m.solution,
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
    )


# ---------------------------------------------------------------------------- ambiguity
@dataclass(frozen=True)
class AmbiguityConfig:
    """How ambiguity is measured: ``probes`` extra inputs; a task is ambiguous when more than
    ``threshold`` of the valid ones (reference did not fail) see a passing solution disagree.

    The default 0.1 lets one or two disagreements on 24 probes pass: type-aware mutation makes
    inputs outside the statement's contract (a negative count, an empty list) on which
    different sound readings may answer differently; a second reading of the statement itself
    disagrees on far more. ``min_valid`` valid probes are needed to decide anything.
    """

    enabled: bool = True
    threshold: float = 0.1
    probes: int = 24
    min_valid: int = 3
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0.0 <= self.threshold < 1.0:
            raise ValueError(
                f"threshold must be in [0, 1) (a share of valid probes), got {self.threshold}"
            )
        if self.probes < 1:
            raise ValueError(f"need probes >= 1, got {self.probes}")
        if self.min_valid < 1:
            raise ValueError(f"need min_valid >= 1, got {self.min_valid}")


@dataclass(frozen=True)
class Disagreement:
    """One valid probe on which passing solutions answered differently.

    ``outputs`` maps who answered (``reference``, ``sample 3``) to what it answered.
    """

    probe: str
    outputs: tuple[tuple[str, str], ...]
    samples: tuple[int, ...]

    def describe(self) -> str:
        shown = "; ".join(f"{who}: {what}" for who, what in self.outputs)
        return f"on {self.probe}: {shown}"


@dataclass(frozen=True)
class AmbiguityReport:
    """What ``measure_ambiguity`` found: probes tried, valid (reference ok) and agreed on."""

    tried: int
    valid: int
    agreed: int
    solutions: int
    duration_s: float
    disagreements: tuple[Disagreement, ...] = ()
    infra_error: str = ""

    @property
    def share(self) -> float:
        """Disagreeing share of the valid probes (0 when none is valid)."""
        return (self.valid - self.agreed) / self.valid if self.valid else 0.0

    def ambiguous(self, cfg: AmbiguityConfig) -> bool:
        """Whether passing solutions disagree on more than the threshold of valid probes."""
        return (
            not self.infra_error
            and self.valid >= cfg.min_valid
            and bool(self.disagreements)
            and self.share > cfg.threshold
        )

    def summary(self) -> str:
        """``3 of 20 valid probes (24 tried) disagree across 2 passing solutions``."""
        return (
            f"{self.valid - self.agreed} of {self.valid} valid probes ({self.tried} tried) "
            f"disagree across {self.solutions} passing solutions"
        )


def measure_ambiguity(
    task: TaskRecord,
    passing: Sequence[tuple[int, str]],
    differ: Differ,
    sandbox: Sandbox,
    cfg: AmbiguityConfig,
) -> AmbiguityReport:
    """Differential testing of the passing solutions ``(sample_index, solution)`` against the
    reference and each other (see the module docstring). Solutions equal to the reference
    text are observed once."""
    t0 = time.monotonic()
    distinct: dict[str, list[int]] = {}
    for idx, sol in passing:
        if sol != task.reference_solution:
            distinct.setdefault(sol, []).append(idx)
    if not distinct:
        return AmbiguityReport(0, 0, 0, len(passing), time.monotonic() - t0)
    probes = differ.probes(task, cfg.probes, cfg.seed)
    sols = list(distinct)
    try:
        seen = differ.observe(task, [task.reference_solution, *sols], probes, sandbox)
    except ProbeInfraError as e:
        return AmbiguityReport(
            len(probes), 0, 0, len(passing), time.monotonic() - t0, infra_error=str(e)
        )
    ref = seen[0]
    valid = agreed = 0
    found: list[Disagreement] = []
    for j, probe in enumerate(probes):
        if not ref[j].ok:
            continue
        valid += 1
        # everyone is compared with the reference; agreeing with it makes them agree
        # with each other too, so one disagreeing solution suffices to flag the probe
        odd = [
            i
            for i in range(len(sols))
            if seen[i + 1][j].observed and not differ.agree(task, ref[j], seen[i + 1][j])
        ]
        if not odd:
            agreed += 1
            continue
        outputs = [("reference", _show(ref[j]))]
        outputs += [(_who(distinct[sols[i]]), _show(seen[i + 1][j])) for i in odd]
        samples = tuple(sorted(s for i in odd for s in distinct[sols[i]]))
        found.append(Disagreement(_short(probe.label, 200), tuple(outputs), samples))
    return AmbiguityReport(
        tried=len(probes),
        valid=valid,
        agreed=agreed,
        solutions=len(passing),
        duration_s=time.monotonic() - t0,
        disagreements=tuple(found),
    )


def _who(samples: list[int]) -> str:
    return "sample " + ",".join(str(s) for s in samples)


@dataclass(frozen=True)
class Evidence:
    """Text for a rejection's detail, built from a report (first few items only)."""

    head: str
    items: list[str] = field(default_factory=list)

    def text(self, limit: int = 1800) -> str:
        out = self.head
        for it in self.items:
            if len(out) + len(it) + 2 > limit:
                break
            out += "\n" + it
        return out[:limit]


def strength_evidence(report: StrengthReport, cfg: StrengthConfig) -> str:
    """The detail of a ``gate.weak_tests`` rejection: the score and the surviving mutants."""
    head = f"mutation score below {cfg.min_score}: {report.summary()}"
    return Evidence(head, [s.describe() for s in report.survivors[:3]]).text()


def ambiguity_evidence(report: AmbiguityReport, cfg: AmbiguityConfig) -> str:
    """The detail of a ``filter.ambiguous`` rejection: the share and the differing outputs."""
    head = f"more than {cfg.threshold:.0%} of valid probes disagree: {report.summary()}"
    return Evidence(head, [d.describe() for d in report.disagreements[:4]]).text()
