"""Generated corpus for the near-dedup benchmark: code and prose with planted variants.

About a third of the base documents get planted variants (identifier renames, reformatting,
reordering, token edits of varying size) and a tenth get template distractors that share half
their text. Ground truth is exact Jaccard on the shingles of every pair inside a family.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from tasksieve.transforms.algorithms.textsim import jaccard

Pairs = set[tuple[int, int]]
SYLL = ["ka", "lo", "mi", "ren", "tu", "sa", "vel", "po", "dri", "an", "ex", "or", "qui", "zen"]


def _vocab(rng: random.Random, n: int) -> list[str]:
    return list(dict.fromkeys("".join(rng.choices(SYLL, k=rng.randint(2, 4))) for _ in range(n)))


@dataclass
class Corpus:
    texts: list[str]
    family: list[int]
    kinds: list[str]


def _prose(rng: random.Random, vocab: list[str], weights: list[float]) -> str:
    sents = []
    for _ in range(rng.randint(5, 12)):
        words = rng.choices(vocab, weights, k=rng.randint(8, 16))
        sents.append(" ".join(words).capitalize() + ".")
    return " ".join(sents)


def _code(rng: random.Random, vocab: list[str]) -> str:
    name = "_".join(rng.sample(vocab, 2))
    args = rng.sample(vocab, 3)
    lines = [f"def {name}({', '.join(args)}):", f'    """{" ".join(rng.sample(vocab, 8))}."""']
    for _ in range(rng.randint(6, 14)):
        v, w = rng.sample(vocab + args, 2)
        lines.append(
            rng.choice(
                [
                    f"    {v} = {w} + {rng.randint(0, 99)}",
                    f"    if {v} > {w}:",
                    f"        {v} -= 1",
                    f"    for {v} in range({w}):",
                    f"    {v}.append({w})",
                    f"    print({v}, {w})",
                ]
            )
        )
    lines.append(f"    return {args[0]}")
    return "\n".join(lines)


def _variant(rng: random.Random, text: str, kind: str, vocab: list[str]) -> tuple[str, str]:
    op = rng.choice(["rename", "reformat", "reorder", "edit", "edit", "edit"])
    parts = text.split("\n") if kind == "code" else text.split(". ")
    if op == "reformat":
        return ("\n\n".join(p.upper() if rng.random() < 0.3 else "  " + p for p in parts), op)
    if op == "reorder":
        i, j = rng.sample(range(1, len(parts)), 2)
        parts[i], parts[j] = parts[j], parts[i]
        return ("\n".join(parts) if kind == "code" else ". ".join(parts), op)
    words = text.split(" ")
    if op == "rename":
        old = rng.sample(sorted({w for w in words if w.isalpha()}), 2)
        return (" ".join(rng.choice(vocab) if w in old else w for w in words), op)
    for _ in range(rng.randint(1, max(2, len(words) // 12))):
        i = rng.randrange(len(words))
        words[i] = rng.choice(vocab)
    return (" ".join(words), op)


def make_corpus(n: int, seed: int = 7) -> Corpus:
    """``n`` documents: bases, planted variants and template distractors, shuffled."""
    rng = random.Random(seed)
    vocab = _vocab(rng, 4000)
    weights = [1 / (i + 1) ** 0.8 for i in range(len(vocab))]
    texts: list[str] = []
    family: list[int] = []
    kinds: list[str] = []
    fam = 0
    while len(texts) < n:
        kind = rng.choice(["code", "prose"])
        base = _code(rng, vocab) if kind == "code" else _prose(rng, vocab, weights)
        texts.append(base)
        family.append(fam)
        kinds.append(f"{kind}:base")
        roll = rng.random()
        if roll < 0.35:
            for _ in range(rng.randint(1, 3)):
                text, op = _variant(rng, base, kind, vocab)
                texts.append(text)
                family.append(fam)
                kinds.append(f"{kind}:{op}")
        elif roll < 0.45:
            half = base[: len(base) // 2]
            other = _code(rng, vocab) if kind == "code" else _prose(rng, vocab, weights)
            texts.append(half + "\n" + other[len(other) // 2 :])
            family.append(fam)
            kinds.append(f"{kind}:distractor")
        fam += 1
    order = list(range(n))
    rng.shuffle(order)
    return Corpus([texts[i] for i in order], [family[i] for i in order], [kinds[i] for i in order])


def ground_truth(c: Corpus, sh: list[frozenset[str]], threshold: float) -> tuple[Pairs, dict]:
    """Pairs at or above ``threshold`` (within families) and Jaccard of every family pair."""
    members: dict[int, list[int]] = {}
    for i, f in enumerate(c.family):
        members.setdefault(f, []).append(i)
    exact: dict[tuple[int, int], float] = {}
    for ms in members.values():
        for x in range(len(ms)):
            for y in range(x + 1, len(ms)):
                a, b = sorted((ms[x], ms[y]))
                exact[(a, b)] = jaccard(sh[a], sh[b])
    return {p for p, j in exact.items() if j >= threshold}, exact
