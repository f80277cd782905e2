"""Family hooks for evaluation reliability: mutants of a reference, and extra inputs to probe.

Two detectors use them (the plain functions live in ``tasksieve.verifiers.reliability``):

- test strength: each ``Mutant`` of the reference is judged by the task's own verifier. A
  mutant the tests do not kill is *surviving* when it differs from the reference on some
  ``Probe`` (an input the tests do not contain), else *equivalent* and left out of the score.
- ambiguity: the reference and every passing rollout are observed on the same probes; valid
  probes (the reference does not fail on them) where passing solutions disagree mean the
  tests under-specify the task.

A family implements ``Differ``. ``observe`` runs solutions in the sandbox and returns plain
data (canonical JSON of what the solution produced, or the error it raised); the comparison
happens on the host in ``agree``, never inside the sandbox.

It does NOT guard against: a mutant or probe generator that misses a class of change (a
surviving mutant is evidence of weak tests; no surviving mutant is not proof of strong ones).
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from tasksieve.schemas import TaskRecord
from tasksieve.verifiers.sandbox.base import Sandbox


@dataclass(frozen=True)
class Mutant:
    """One small, deliberate change to the reference solution.

    ``operator`` is a stable name (``py.compare_flip``, ``sql.join_kind``, ``config.drop_field``,
    ``api.drop_call``); ``where`` says where it applied (``line 4``, ``WHERE``, ``spec.replicas``);
    ``solution`` is the whole mutated solution text.
    """

    operator: str
    where: str
    solution: str

    def diff(self, reference: str, max_lines: int = 12) -> str:
        """A short unified diff from the reference to this mutant."""
        lines = difflib.unified_diff(
            reference.splitlines(), self.solution.splitlines(), "reference", "mutant", lineterm=""
        )
        out = list(lines)[2:]  # drop the file header lines
        if len(out) > max_lines:
            out = [*out[:max_lines], f"... ({len(out) - max_lines} more lines)"]
        return "\n".join(out)


@dataclass(frozen=True)
class Probe:
    """One extra input the task's own tests do not contain.

    ``label`` is short and human-readable (``add(-1, 0)``, ``db copy 3: NULL amounts``);
    ``payload`` is JSON-serialisable and means something only to the family's ``observe``.
    ``origin`` is ``derived`` (made from the tests' own inputs), ``task`` (inputs the task
    provides), ``domain`` (made by the task's ``input_domain`` generator), ``convention`` (an
    input that separates two common readings of the statement) or ``variation`` (the family's
    natural variation, e.g. a perturbed database). ``why`` says why the input is inside the
    task's contract; empty when the family has no contract model (``contracted`` False), and
    the detectors then allow for probes outside it (``AmbiguityConfig.threshold``).
    ``typical``: the input also fits the shape of the tests' own inputs (types, signs,
    characters, emptiness), so a difference there is one the tests should have caught.
    """

    label: str
    payload: Any
    origin: str = "derived"
    why: str = ""
    contracted: bool = False
    typical: bool = False


@dataclass(frozen=True)
class Observation:
    """What one solution did on one probe, as plain data.

    ``ok`` is False when the solution raised, crashed or hit a limit on the probe; ``value`` is
    then the error's type (not its message, which may hold addresses or paths). When ``ok``,
    ``value`` is canonical JSON of the output.
    """

    ok: bool
    value: str

    @property
    def observed(self) -> bool:
        """False for ``Observation.not_run()``: the probe was skipped for this solution (e.g.
        after it kept hitting time limits), which says nothing about its answer."""
        return self.ok or self.value != NOT_RUN

    @staticmethod
    def not_run() -> Observation:
        """A probe left unobserved; the detectors ignore it (neither agreement nor not)."""
        return Observation(False, NOT_RUN)

    @staticmethod
    def of(output: Any) -> Observation:
        """A successful observation of a JSON-serialisable output (keys sorted)."""
        return Observation(True, json.dumps(output, sort_keys=True, default=repr))


NOT_RUN = "not_run"
"""The value of an observation whose probe was not run (see ``Observation.observed``)."""


@dataclass(frozen=True)
class ProbeSet:
    """Probes kept inside a task's contract, and how many candidates were dropped and why.

    ``dropped`` maps a reason (``precondition``, ``input_domain``, ``test_envelope``,
    ``reference_rejects``) to a count.
    """

    probes: tuple[Probe, ...]
    dropped: tuple[tuple[str, int], ...] = ()

    def dropped_total(self) -> int:
        """All candidates dropped, whatever the reason."""
        return sum(n for _, n in self.dropped)


class ProbeInfraError(RuntimeError):
    """The sandbox or harness broke while observing: says nothing about the solutions."""


class Differ(Protocol):
    """A family's mutants, probes and observations (see the module docstring)."""

    family: str

    def mutants(self, task: TaskRecord, limit: int, seed: int) -> list[Mutant]:
        """At most ``limit`` mutants of the task's reference, deterministic for ``seed``.

        Mutants identical to the reference text, or that do not parse, are not returned.
        """
        ...

    def probes(self, task: TaskRecord, limit: int, seed: int) -> list[Probe]:
        """At most ``limit`` inputs the task's tests do not contain, deterministic for ``seed``."""
        ...

    def observe(
        self, task: TaskRecord, solutions: Sequence[str], probes: Sequence[Probe], sandbox: Sandbox
    ) -> list[list[Observation]]:
        """``result[i][j]``: what ``solutions[i]`` did on ``probes[j]``.

        Raises ``ProbeInfraError`` when the environment broke (never for a bad solution).
        """
        ...

    def agree(self, task: TaskRecord, a: Observation, b: Observation) -> bool:
        """Whether two observations count as the same answer for this task (e.g. SQL rows
        compared unordered with the spec's float tolerance)."""
        ...


class ScopedDiffer(Differ, Protocol):
    """A differ that knows its task's input contract (see ``reliability.contract``)."""

    def scoped_probes(
        self, task: TaskRecord, limit: int, seed: int, sandbox: Sandbox, *, envelope: bool
    ) -> ProbeSet:
        """At most ``limit`` probes inside the task's contract, each with its ``why``.

        The contract is the statement's stated preconditions and the task's ``input_domain``;
        with ``envelope`` also the shape of the tests' own inputs for inputs mutated from them
        (types, signs, character classes, emptiness). Convention probes are made only when the
        statement touches the convention, and are held to the stated contract only.
        Raises ``ProbeInfraError`` when the environment broke.
        """
        ...
