"""Which benchmark item a contaminated task came from: the names it defines, the best-item order.

A benchmark can hold near-twin items (HumanEval/46 and /63 differ in one recurrence term): a
rewording of one passes the threshold for both. The item the task was made from is the one
whose shingles the task holds the most of, in both channels together (``best_item_first``).

Not guarded against: twins so close that a rewording holds as much of the sibling as of its
own item; both are reported, and the first is then a tie broken by score and id.
"""

from __future__ import annotations

import re

from tasksieve.schemas import Finding
from tasksieve.transforms.algorithms.textsim import ShingleConfig, normalize_text, shingle_hashes

ORDER = {
    "substring": 0,
    "ngram_short": 1,
    "sentence": 2,
    "containment": 3,
    "layout": 4,
    "name": 5,
}
_DEF_NAME = re.compile(r"\bdef\s+([A-Za-z_]\w*)")
_NAME = re.compile(r"[A-Za-z_]\w*")
_DOCSTRING = re.compile(r'"""([\s\S]*?)"""|\'\'\'([\s\S]*?)\'\'\'')
_EXAMPLE = re.compile(r">>>|\w\(")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_ARTICLES = frozenset({"a", "an", "the"})


def entry_names(texts: list[str]) -> list[frozenset[str]]:
    """The function names each item defines that have ``_`` and that no other item defines.

    A one-word name (``add``, ``fib``) or one two items define says nothing about which item
    a task came from. The helpers an item defines count too: a task made from HumanEval/50
    renames ``decode_shift`` but still needs the ``encode_shift`` it decodes.
    """
    defined = [frozenset(_DEF_NAME.findall(t)) for t in texts]
    seen: dict[str, int] = {}
    for names in defined:
        for name in names:
            seen[name] = seen.get(name, 0) + 1
    return [frozenset(n for n in names if "_" in n and seen[n] == 1) for names in defined]


def prose_sentences(text: str, min_words: int) -> list[str]:
    """The docstring sentences of ``text`` with at least ``min_words`` words, as word strings.

    Lines with a call or a doctest prompt, the line after a prompt (its output) and lines
    that are mostly not letters (``[0, 2, 3]``, ``7.5``) are examples, not prose. Words are
    lowercased, and
    punctuation and articles are dropped (``plain_words``) so "Return the maximum element."
    and "return maximum element" are one sentence.
    """
    out: list[str] = []
    for m in _DOCSTRING.finditer(text):
        doc = m.group(1) if m.group(1) is not None else m.group(2)
        prose, after_prompt = [], False
        for line in doc.split("\n"):
            letters = sum(c.isalpha() for c in line)
            example = bool(_EXAMPLE.search(line)) or after_prompt
            if not example and letters >= 0.5 * len(line.replace(" ", "")):
                prose.append(line)
            after_prompt = ">>>" in line
        for sentence in _SENTENCE_END.split(" ".join(prose)):
            words = plain_words(sentence)
            if len(words.split()) >= min_words:
                out.append(words)
    return out


def sentence_table(texts: list[str], min_words: int) -> dict[int, list[tuple[int, str]]]:
    """Hash of a sentence's first ``min_words`` words -> (item, sentence) of each such sentence.

    Only sentences exactly one item has. A task is checked with one hash of each of its word
    ``min_words``-grams; a hit is confirmed by finding the whole sentence in the task's words.
    """
    owners: dict[str, set[int]] = {}
    for i, text in enumerate(texts):
        for sentence in prose_sentences(text, min_words):
            owners.setdefault(sentence, set()).add(i)
    unique = [(s, items.pop()) for s, items in owners.items() if len(items) == 1]
    heads = [" ".join(s.split()[:min_words]) for s, _ in unique]
    table: dict[int, list[tuple[int, str]]] = {}
    cfg = ShingleConfig(kind="word", size=min_words)
    for (sentence, item), h in zip(unique, shingle_hashes(heads, cfg), strict=True):
        table.setdefault(int(h[0]), []).append((item, sentence))
    return table


def sentences_in(text: str, table: dict[int, list[tuple[int, str]]], min_words: int) -> set[int]:
    """Items of ``table`` one of whose sentences ``text`` holds word for word."""
    plain = plain_words(text)
    if not table or len(plain.split()) < min_words:
        return set()
    (grams,) = shingle_hashes([plain], ShingleConfig(kind="word", size=min_words))
    padded = f" {plain} "
    return {
        item
        for h in set(grams.tolist()) & table.keys()
        for item, sentence in table[h]
        if f" {sentence} " in padded
    }


def plain_words(text: str) -> str:
    """Lowercased words of ``text`` without articles, single-spaced."""
    return " ".join(w for w in normalize_text(text).split() if w not in _ARTICLES)


def names_in(text: str) -> frozenset[str]:
    """Identifier-like words of ``text`` with an underscore (candidate entry-point names)."""
    return frozenset(w for w in _NAME.findall(text) if "_" in w)


def best_item_first(found: list[Finding], weight: dict[str, float]) -> list[Finding]:
    """Findings grouped by item, best item first: largest ``weight``, then best score, then id.

    Within an item, its findings come best score first (a substring before the rest on ties).
    """
    best: dict[str, float] = {}
    for f in found:
        best[f.other_id] = max(best.get(f.other_id, 0.0), f.score)

    def key(f: Finding) -> tuple[float, float, str, float, int]:
        item = f.other_id
        return (-weight.get(item, 0.0), -best[item], item, -f.score, ORDER.get(f.method, 2))

    return sorted(found, key=key)
