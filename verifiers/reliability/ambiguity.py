"""Ambiguity: do passing solutions answer differently on inputs the task allows?

``measure_ambiguity`` observes the reference and every distinct passing solution on the same
probes (``contract.probe_set`` with the tests' envelope). A probe the reference rejects
(raises, hits a limit) is not an input of the task and is dropped. On every other probe, a
passing solution that answers differently from the reference is a *disagreement*: two
behaviours, both consistent with the tests, on one input.

Outcomes (``AmbiguityReport.outcome``):

- ``ambiguous``: some disagreement on a probe known to be inside the contract (``contracted``:
  the family checked it against the stated preconditions, the task's ``input_domain`` and the
  tests' envelope, or it is a convention probe the statement touches); or, for probes of a
  family without a contract model, a disagreeing share above ``threshold`` (room for a few
  probes outside an unmodelled contract).
- ``not_enough_evidence``: no disagreement, but fewer than ``min_distinct`` distinct passing
  solutions besides the reference, or fewer than ``min_valid`` valid probes: agreement was not
  tested, so the task is not called unambiguous (it is kept; the counter says so).
- ``unambiguous``: enough distinct solutions agreed on enough valid probes.
- ``infra_error``: observing broke; nothing is decided.

It does NOT catch: a second reading no sampled solution takes (agreement of samples that all
read the statement one way looks the same as an unambiguous statement), readings that differ
only on inputs no probe makes, or a disagreement caused by a wrong solution the tests let
through (weak tests; the strength stage runs first and reports those as ``gate.weak_tests``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from tasksieve.schemas import TaskRecord
from tasksieve.verifiers.families.probes import Differ, ProbeInfraError
from tasksieve.verifiers.reliability.contract import distinct_solutions, normalised, probe_set
from tasksieve.verifiers.reliability.evidence import Evidence, short, show
from tasksieve.verifiers.reliability.shared import observe as observe_shared
from tasksieve.verifiers.sandbox.base import Sandbox

OUTCOMES = ("ambiguous", "unambiguous", "not_enough_evidence", "infra_error")


@dataclass(frozen=True)
class AmbiguityConfig:
    """How ambiguity is measured (see the module docstring for the outcomes).

    ``probes`` extra inputs per task; ``threshold`` the disagreeing share of valid probes above
    which probes of a family without a contract model make a task ambiguous (one disagreement
    on a contracted probe always does); ``min_valid`` valid probes and ``min_distinct``
    distinct passing solutions besides the reference are needed to call a task unambiguous.
    """

    enabled: bool = True
    threshold: float = 0.1
    probes: int = 24
    min_valid: int = 3
    min_distinct: int = 2
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
        if self.min_distinct < 1:
            raise ValueError(
                f"need min_distinct >= 1 (distinct passing solutions), got {self.min_distinct}"
            )


@dataclass(frozen=True)
class Disagreement:
    """One valid probe on which passing solutions answered differently.

    ``outputs`` maps who answered (``reference``, ``sample 3``) to what it answered; ``why``
    says why the input is inside the task's contract (empty: the family has no contract model).
    """

    probe: str
    outputs: tuple[tuple[str, str], ...]
    samples: tuple[int, ...]
    why: str = ""
    contracted: bool = False

    def describe(self) -> str:
        """``on f(2) (in contract: ...): reference: 1; sample 3: 2``."""
        shown = "; ".join(f"{who}: {what}" for who, what in self.outputs)
        scope = f" (in contract: {self.why})" if self.why else ""
        return f"on {self.probe}{scope}: {shown}"


@dataclass(frozen=True)
class AmbiguityReport:
    """What ``measure_ambiguity`` found: probes tried, valid (reference ok) and agreed on.

    ``distinct``: passing solutions compared that differ from the reference's text (and each
    other's) beyond formatting; ``dropped``: candidate probes left out as outside the contract
    (the reference's rejections are ``tried - valid``); ``loose_valid``: valid probes
    without a contract model (None: all of ``valid``), the base of ``threshold``.
    """

    tried: int
    valid: int
    agreed: int
    solutions: int
    duration_s: float
    disagreements: tuple[Disagreement, ...] = ()
    infra_error: str = ""
    distinct: int = 0
    dropped: int = 0
    loose_valid: int | None = None

    @property
    def share(self) -> float:
        """Disagreeing share of the valid probes (0 when none is valid)."""
        return (self.valid - self.agreed) / self.valid if self.valid else 0.0

    def outcome(self, cfg: AmbiguityConfig) -> str:
        """One of ``OUTCOMES`` (see the module docstring)."""
        if self.infra_error:
            return "infra_error"
        if any(d.contracted for d in self.disagreements):
            return "ambiguous"
        loose = [d for d in self.disagreements if not d.contracted]
        base = self.valid if self.loose_valid is None else self.loose_valid
        if loose and base >= cfg.min_valid and len(loose) / base > cfg.threshold:
            return "ambiguous"
        if self.valid < cfg.min_valid or self.distinct < cfg.min_distinct:
            return "not_enough_evidence"
        return "unambiguous"

    def ambiguous(self, cfg: AmbiguityConfig) -> bool:
        """Whether the task is ambiguous (``outcome`` is ``ambiguous``)."""
        return self.outcome(cfg) == "ambiguous"

    def summary(self) -> str:
        """``3 of 20 valid probes (24 tried) disagree across 2 passing solutions (2 distinct)``."""
        text = (
            f"{self.valid - self.agreed} of {self.valid} valid probes ({self.tried} tried) "
            f"disagree across {self.solutions} passing solutions ({self.distinct} distinct)"
        )
        if self.dropped:
            text += f"; {self.dropped} inputs outside the contract not probed"
        return text


def measure_ambiguity(
    task: TaskRecord,
    passing: Sequence[tuple[int, str]],
    differ: Differ,
    sandbox: Sandbox,
    cfg: AmbiguityConfig,
) -> AmbiguityReport:
    """Differential testing of the passing solutions ``(sample_index, solution)`` against the
    reference (see the module docstring). Solutions equal to the reference text (formatting
    aside) are not observed; each distinct text is observed once."""
    t0 = time.monotonic()
    ref_text = normalised(task.reference_solution)
    by_text: dict[str, list[int]] = {}
    first: dict[str, str] = {}
    for idx, sol in passing:
        key = normalised(sol)
        if key != ref_text:
            by_text.setdefault(key, []).append(idx)
            first.setdefault(key, sol)
    distinct = distinct_solutions(task.reference_solution, (s for _, s in passing))
    if not by_text:
        return AmbiguityReport(0, 0, 0, len(passing), time.monotonic() - t0, distinct=0)
    sols = [first[k] for k in by_text]
    groups = list(by_text.values())
    try:
        scope = probe_set(differ, task, cfg.probes, cfg.seed, sandbox, envelope=True)
        probes = scope.probes
        seen = observe_shared(differ, task, sols, probes, sandbox)
    except ProbeInfraError as e:
        return AmbiguityReport(
            0, 0, 0, len(passing), time.monotonic() - t0, infra_error=str(e), distinct=distinct
        )
    ref = seen[0]
    valid = agreed = loose_valid = 0
    found: list[Disagreement] = []
    for j, probe in enumerate(probes):
        if not ref[j].ok:  # the reference rejects it: not an input of the task
            continue
        valid += 1
        loose_valid += not probe.contracted
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
        outputs = [("reference", show(ref[j]))]
        outputs += [(_who(groups[i]), show(seen[i + 1][j])) for i in odd]
        samples = tuple(sorted(s for i in odd for s in groups[i]))
        found.append(
            Disagreement(
                short(probe.label, 200), tuple(outputs), samples, probe.why, probe.contracted
            )
        )
    return AmbiguityReport(
        tried=len(probes),
        valid=valid,
        agreed=agreed,
        solutions=len(passing),
        duration_s=time.monotonic() - t0,
        disagreements=tuple(found),
        distinct=distinct,
        dropped=scope.dropped_total(),
        loose_valid=loose_valid,
    )


def _who(samples: list[int]) -> str:
    return "sample " + ",".join(str(s) for s in samples)


def ambiguity_evidence(report: AmbiguityReport, cfg: AmbiguityConfig) -> str:
    """The detail of a ``filter.ambiguous`` rejection: each input, why it is in contract, and
    the differing outputs."""
    contracted = sum(d.contracted for d in report.disagreements)
    if contracted:
        head = f"passing solutions disagree on {contracted} input(s) inside the task's contract"
    else:
        head = f"more than {cfg.threshold:.0%} of valid probes disagree"
    head += f": {report.summary()}"
    ordered = sorted(report.disagreements, key=lambda d: not d.contracted)
    return Evidence(head, [d.describe() for d in ordered[:4]]).text()
