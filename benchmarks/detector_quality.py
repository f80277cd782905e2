"""Precision and recall of the reliability detectors on the hand-made labelled sets.

Two sets, same layout: ``tests/data/labelled/`` (the first set, four families, classes
``weak_tests`` / ``ambiguous`` / ``flaky`` / ``sound``) and ``tests/data/labelled2/`` (code
tasks written before the contract-aware detectors, classes ``strong`` / ``weak_tests`` /
``ambiguous``; ``sound`` is read as ``strong``). Each holds ``tasks.jsonl`` (tasks in the
project's schema), ``rollouts.jsonl`` (alternative solutions standing in for samples, in the
replay sampler's ``task_id`` / ``completion`` format) and ``labels.jsonl`` (per task: its
class and the three booleans). Every task is run through the functions the pipeline runs, in
the pipeline's order:

1. ``transforms.reliability.gates.run_gates`` (``--reference-runs`` runs): the flaky detector fires
when
   the reason is ``gate.reference_flaky``; a task rejected by the gates for any reason goes
   no further (the other two detectors count it as not flagged).
2. ``tasksieve.verifiers.reliability.measure_strength`` with the family's differ, the verifier
   calibrated on the reference's runtime as the TestStrength stage does: weak when
   ``StrengthReport.weak``.
3. each rollout verified (``extract_solution`` then the verifier, as Verify does), then
   ``measure_ambiguity`` on the passing ones: ambiguous when ``AmbiguityReport.ambiguous``.

Steps 2 and 3 both run on every task that passes the gates; the per-detector table measures
each on its own. The per-label table takes the pipeline's decision instead: flaky if the
gates say so, else weak_tests if the tests are too weak (``gate.weak_tests``, or
``gate.too_few_tests`` from the gates), else ambiguous if the ambiguity check says so, else
strong (a ``not_enough_evidence`` outcome is kept, so it counts as strong, and is listed).
Prints both tables per set, then every miss and false alarm by task id.

    python -m benchmarks.detector_quality [--set old|new|both] [--families code,sql] [--match ID] \
        [--reference-runs 3] [--max-mutants 16] [--probes 24] [--json out.json]

Baseline: none; precision and recall are ratios against the hand labels.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from benchmarks.timing import run_reported
from tasksieve.schemas import TaskRecord
from tasksieve.transforms.reliability.gates import GatesConfig, run_gates
from tasksieve.transforms.runtime.items import Item
from tasksieve.transforms.samplers.extract import extract_solution
from tasksieve.verifiers.registry import VerifierCache, get_differ, make_sandbox
from tasksieve.verifiers.reliability import (
    AmbiguityConfig,
    StrengthConfig,
    ambiguity_evidence,
    measure_ambiguity,
    measure_strength,
)

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "labelled"
DATA2 = DATA.parent / "labelled2"
SETS = {"old": DATA, "new": DATA2}
DETECTORS = ("weak_tests", "ambiguous", "flaky")
LABELS = ("strong", "weak_tests", "ambiguous", "flaky")
TOO_WEAK = ("gate.too_few_tests",)


@dataclass(frozen=True)
class Labelled:
    """One task of the set with its rollouts and labels."""

    task: TaskRecord
    rollouts: tuple[str, ...]
    label: str
    truth: dict[str, bool]


@dataclass
class Outcome:
    """What the detectors said about one task."""

    task_id: str
    family: str
    label: str
    truth: dict[str, bool]
    predicted: dict[str, bool] = field(default_factory=dict)
    gate_reason: str = ""
    strength: str = ""
    ambiguity: str = ""
    outcome: str = ""
    evidence: str = ""
    seconds: float = 0.0

    @property
    def decision(self) -> str:
        """The label the pipeline's order of stages gives (see the module docstring)."""
        if self.predicted.get("flaky"):
            return "flaky"
        if self.predicted.get("weak_tests") or self.gate_reason in TOO_WEAK:
            return "weak_tests"
        if self.gate_reason:
            return "rejected"
        return "ambiguous" if self.predicted.get("ambiguous") else "strong"


def load(root: Path = DATA, families: Iterable[str] | None = None) -> list[Labelled]:
    """The labelled set under ``root`` (only ``families`` when given), in file order."""
    wanted = set(families) if families else None
    rollouts: dict[str, list[str]] = {}
    for line in (root / "rollouts.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            rollouts.setdefault(row["task_id"], []).append(row["completion"])
    labels = {}
    for line in (root / "labels.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            labels[row["task_id"]] = row
    out = []
    for line in (root / "tasks.jsonl").read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        task = TaskRecord.model_validate_json(line)
        if wanted is not None and task.family not in wanted:
            continue
        lab = labels[task.id]
        truth = {d: bool(lab[d]) for d in DETECTORS}
        label = "strong" if lab["class"] == "sound" else lab["class"]
        out.append(Labelled(task, tuple(rollouts.get(task.id, [])), label, truth))
    return out


def evaluate(
    item: Labelled,
    cache: VerifierCache,
    gates: GatesConfig,
    strength: StrengthConfig,
    ambiguity: AmbiguityConfig,
) -> Outcome:
    """Run the three detectors on one labelled task (see the module docstring)."""
    t0 = time.monotonic()
    task = item.task
    out = Outcome(task.id, task.family, item.label, item.truth)
    out.predicted = {d: False for d in DETECTORS}
    verifier = cache.get(task.family)
    differ = get_differ(task.family)
    results, reason = run_gates(Item(task, "labelled", 0, "0" * 64), verifier, gates)
    out.gate_reason = reason
    out.predicted["flaky"] = reason == "gate.reference_flaky"
    if reason:
        out.seconds = time.monotonic() - t0
        return out
    ref_s = next((g.duration_s for g in results if g.gate == "reference_passes"), None)
    if ref_s:
        verifier.calibrate(task, ref_s)
    report = measure_strength(task, verifier, differ, cache.sandbox, strength)
    out.predicted["weak_tests"] = report.weak(strength)
    out.strength = report.summary()
    entry = getattr(task.verifier, "entry_point", None)
    passing = []
    for i, completion in enumerate(item.rollouts):
        solution = extract_solution(completion, task.family, entry)
        if verifier.verify(task, solution).passed:
            passing.append((i, solution))
    amb = measure_ambiguity(task, passing, differ, cache.sandbox, ambiguity)
    out.predicted["ambiguous"] = amb.ambiguous(ambiguity)
    out.outcome = amb.outcome(ambiguity)
    out.ambiguity = amb.summary() + (f"; infra: {amb.infra_error}" if amb.infra_error else "")
    if out.predicted["ambiguous"]:
        out.evidence = ambiguity_evidence(amb, ambiguity)
    out.seconds = time.monotonic() - t0
    return out


@dataclass(frozen=True)
class Score:
    """Confusion counts of one detector over some tasks, with precision and recall."""

    tp: int
    fp: int
    fn: int
    tn: int

    @property
    def precision(self) -> float | None:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else None

    @property
    def recall(self) -> float | None:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else None


def score(outcomes: Iterable[Outcome], detector: str) -> Score:
    """Confusion counts of ``detector`` over ``outcomes``."""
    tp = fp = fn = tn = 0
    for o in outcomes:
        truth, said = o.truth[detector], o.predicted[detector]
        tp += truth and said
        fp += said and not truth
        fn += truth and not said
        tn += not truth and not said
    return Score(tp, fp, fn, tn)


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}"


def table(outcomes: list[Outcome]) -> str:
    """The precision/recall table: one row per detector and family, then all families."""
    families = sorted({o.family for o in outcomes})
    lines = ["| detector | family | TP | FP | FN | TN | precision | recall |", "|" + "---|" * 8]
    for d in DETECTORS:
        for fam in [*families, "all"]:
            rows = [o for o in outcomes if fam in ("all", o.family)]
            s = score(rows, d)
            lines.append(
                f"| {d} | {fam} | {s.tp} | {s.fp} | {s.fn} | {s.tn} | "
                f"{_fmt(s.precision)} | {_fmt(s.recall)} |"
            )
    return "\n".join(lines)


def label_score(outcomes: Iterable[Outcome], label: str) -> Score:
    """Confusion counts of the pipeline's decision (``Outcome.decision``) for ``label``."""
    tp = fp = fn = tn = 0
    for o in outcomes:
        truth, said = o.label == label, o.decision == label
        tp += truth and said
        fp += said and not truth
        fn += truth and not said
        tn += not truth and not said
    return Score(tp, fp, fn, tn)


def label_table(outcomes: list[Outcome], name: str) -> str:
    """Per-label precision and recall of the pipeline's decision on one set."""
    lines = ["| set | label | tasks | TP | FP | FN | precision | recall |", "|" + "---|" * 8]
    for lab in LABELS:
        n = sum(o.label == lab for o in outcomes)
        if not n:
            continue
        s = label_score(outcomes, lab)
        lines.append(
            f"| {name} | {lab} | {n} | {s.tp} | {s.fp} | {s.fn} | "
            f"{_fmt(s.precision)} | {_fmt(s.recall)} |"
        )
    return "\n".join(lines)


def decision_mistakes(outcomes: list[Outcome]) -> list[str]:
    """One line per task whose decision differs from its label, and each not-enough-evidence."""
    out = []
    for o in outcomes:
        if o.decision != o.label:
            why = o.gate_reason or f"{o.strength}; {o.ambiguity}"
            out.append(f"labelled {o.label}, decided {o.decision}: {o.task_id} ({why})")
        if o.outcome == "not_enough_evidence":
            out.append(f"not enough evidence: {o.task_id} ({o.ambiguity})")
    return out


def mistakes(outcomes: list[Outcome]) -> list[str]:
    """One line per miss (FN) and false alarm (FP), with what the detectors reported."""
    out = []
    for o in outcomes:
        for d in DETECTORS:
            if o.truth[d] == o.predicted[d]:
                continue
            kind = "missed" if o.truth[d] else "false alarm"
            why = o.gate_reason or (o.strength if d == "weak_tests" else o.ambiguity)
            out.append(f"{kind} {d}: {o.task_id} ({why or 'passed the gates'})")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", choices=["old", "new", "both"], default="both")
    ap.add_argument("--data", type=Path, help="another set in the same layout (replaces --set)")
    ap.add_argument("--families", default="", help="comma-separated (default: all)")
    ap.add_argument("--match", default="", help="only tasks whose id contains this text")
    ap.add_argument("--reference-runs", type=int, default=GatesConfig().reference_runs)
    ap.add_argument("--max-mutants", type=int, default=StrengthConfig().max_mutants)
    ap.add_argument("--probes", type=int, default=StrengthConfig().probes)
    ap.add_argument("--json", type=Path, help="also write every task's outcome here")
    args = ap.parse_args(argv)
    families = [f for f in args.families.split(",") if f] or None
    chosen = (
        {"custom": args.data}
        if args.data
        else (SETS if args.set == "both" else {args.set: SETS[args.set]})
    )
    gates = GatesConfig(reference_runs=args.reference_runs)
    strength = StrengthConfig(max_mutants=args.max_mutants, probes=args.probes)
    ambiguity = AmbiguityConfig(probes=args.probes)
    sandbox = make_sandbox("process")
    cache = VerifierCache(sandbox)
    t0 = time.monotonic()
    every: dict[str, list[Outcome]] = {}
    try:
        for name, root in chosen.items():
            every[name] = outcomes = []
            for it in load(root, families):
                if args.match not in it.task.id:
                    continue
                o = evaluate(it, cache, gates, strength, ambiguity)
                outcomes.append(o)
                said = ",".join(d for d in DETECTORS if o.predicted[d]) or "-"
                print(
                    f"{o.task_id:42s} {o.label:10s} flagged: {said:20s} {o.seconds:6.1f}s",
                    flush=True,
                )
    finally:
        cache.close()
        sandbox.close()
    for name, outcomes in every.items():
        print(f"\n## set {name}\n")
        print(table(outcomes))
        print()
        print(label_table(outcomes, name))
        print()
        for line in mistakes(outcomes) + decision_mistakes(outcomes):
            print(line)
        for o in outcomes:
            if o.evidence:
                print(f"evidence {o.task_id}: {o.evidence.splitlines()[1][:300]}")
    total = sum(len(v) for v in every.values())
    print(f"\n{total} tasks in {time.monotonic() - t0:.0f}s")
    if args.json:
        rows = [{"set": n, **asdict(o)} for n, v in every.items() for o in v]
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(run_reported(main))
