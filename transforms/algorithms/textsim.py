"""Normalisation and shingling for code and prose: the plain functions behind dedup and decontam.

A text becomes tokens (``tokens``), tokens become shingles (word n-grams, code-token n-grams
or character n-grams), and shingles become 64-bit hashes (``shingle_hashes``, vectorised over
a batch with numpy). ``shingles`` returns the same shingles as strings, for tests, ground truth
and small sets. Normalisation folds case and whitespace, can drop comments (``#``, ``//`` and
``--`` that start a line or follow a space) and triple-quoted docstrings, and can replace
code identifiers with one marker token so renamed variables and functions still match, and
(``drop_layout``) remove what only formats code: type annotations of a ``def``, quotes,
doctest prompts, arrows, commas and colons, articles and the words that introduce an example
(``return``, ``should``, ``assert``), so a doctest, an assert and "f(2) should return 4" all
become ``ID ( 2 ) 4``.

Not guarded against: identifier detection is lexical (names that are called, defined with
``def``/``class``, parameters of a ``def``, assigned at a line start, ``for`` targets, or
spelled with ``_``, digits or camelCase), so a renamed plain English word stays a changed
word; comment stripping does not parse strings, so a ``#`` after a space inside a string
literal ends that line's text. ``drop_layout`` also drops ``>``, ``=`` and ``-``, so a
comparison or a sign is not told apart from an arrow.
"""

from __future__ import annotations

import functools
import hashlib
import keyword
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

KINDS = ("word", "code", "char")
ID_TOKEN = "\x00id"
_WORD = re.compile(r"[a-z0-9_]+")
_WORD_CASED = re.compile(r"[A-Za-z0-9_]+")
_CODE = re.compile(
    r"[A-Za-z_][A-Za-z0-9_]*|\d+(?:\.\d+)?|\*\*|//|==|!=|<=|>=|->|:=|\+=|-=|[^\sA-Za-z0-9_]"
)
_DOCSTRING = re.compile(r'"""[\s\S]*?"""|\'\'\'[\s\S]*?\'\'\'')
_COMMENT = re.compile(r"(?m)(?:^|(?<=\s))(?:#|//|--)[^\n]*")
_CALLED = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)\s*\(")
_DEFINED = re.compile(r"\b(?:def|class|function|fn|func)\s+([A-Za-z_][A-Za-z0-9_]*)")
_DEF_PARAMS = re.compile(r"\bdef\s+[A-Za-z_]\w*\s*\(([^)]*)\)")
_PARAM = re.compile(r"(?:^|,)\s*\**([A-Za-z_]\w*)")
_ASSIGNED = re.compile(r"(?m)^\s*([A-Za-z_]\w*)\s*(?:[-+*/%|&]|//|\*\*)?=(?!=)")
_FOR = re.compile(r"\bfor\s+([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)\s+in\b")
_CODEY = re.compile(r"^(?:\w*_\w*|[a-z]+[A-Z]\w*|[A-Za-z]+\d\w*)$")
_LAYOUT = frozenset(
    {'"', "'", "`", ">", "->", "=", "==", ":", ",", ".", ";", "-", "\u279e", "#", "!", "?"}
    | {"a", "an", "the", "is", "are", "def", "return", "returns", "should", "assert", "for"}
    | {"example", "examples"}
)
_DEF_HEAD = re.compile(r"\bdef\s+[A-Za-z_]\w*\s*\(")
_KEEP = frozenset(keyword.kwlist) | frozenset(dir(__builtins__)) | {"self", "cls", "list", "dict"}

MASK64 = np.uint64(0xFFFFFFFFFFFFFFFF)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLD = np.uint64(0x9E3779B97F4A7C15)
_TOKEN_CACHE: dict[str, int] = {}
_CACHE_LIMIT = 2_000_000


@dataclass(frozen=True)
class ShingleConfig:
    """How text becomes shingles: kind (word, code, char), n-gram size and normalisation."""

    kind: str = "word"
    size: int = 3
    lowercase: bool = True
    strip_comments: bool = False
    strip_docstrings: bool = False
    canonical_identifiers: bool = False
    drop_layout: bool = False

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"shingle kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        if not 1 <= self.size <= 64:
            raise ValueError(f"need 1 <= shingle size <= 64, got {self.size}")


def normalize_text(text: str) -> str:
    """Lowercase and keep only word characters, single-spaced."""
    return " ".join(_WORD.findall(text.lower()))


def strip_code(text: str, comments: bool = True, docstrings: bool = True) -> str:
    """Remove triple-quoted strings and/or line comments."""
    if docstrings:
        text = _DOCSTRING.sub(" ", text)
    if comments:
        text = _COMMENT.sub(" ", text)
    return text


def strip_annotations(text: str) -> str:
    """Remove parameter and return annotations from every ``def`` line (brackets respected)."""
    out: list[str] = []
    pos = 0
    for m in _DEF_HEAD.finditer(text):
        out.append(text[pos : m.end()])
        i, depth, skipping = m.end(), 1, False
        while i < len(text) and depth:
            c = text[i]
            if c in "([{":
                depth += 1
            elif c in ")]}":
                depth -= 1
            if depth == 1 and c == ":":
                skipping = True
            elif depth == 1 and c in ",=":
                skipping = False
            if depth == 0 or not skipping:
                out.append(c)
            i += 1
        rest = re.match(r"\s*->[^:\n]*", text[i:])
        pos = i + (rest.end() if rest else 0)
    out.append(text[pos:])
    return "".join(out)


@functools.lru_cache(maxsize=256)
def identifier_names(text: str) -> frozenset[str]:
    """Names that look like code identifiers: called, defined, def parameters or code-spelled.

    Cached (a text checked against two shingle channels is parsed for names once).
    """
    names = set(_CALLED.findall(text)) | set(_DEFINED.findall(text))
    for params in _DEF_PARAMS.findall(text):
        names.update(_PARAM.findall(params))
    names.update(_ASSIGNED.findall(text))
    for targets in _FOR.findall(text):
        names.update(t.strip() for t in targets.split(","))
    names.update(w for w in _WORD_CASED.findall(text) if _CODEY.match(w) and not w.isdigit())
    return frozenset(n for n in names if n not in _KEEP)


def tokens(text: str, cfg: ShingleConfig = ShingleConfig()) -> list[str]:
    """Normalised tokens of ``text`` (characters for the char kind, as one-element list)."""
    if cfg.strip_comments or cfg.strip_docstrings:
        text = strip_code(text, cfg.strip_comments, cfg.strip_docstrings)
    names = identifier_names(text) if cfg.canonical_identifiers else frozenset()
    if cfg.kind == "char":
        words = _WORD_CASED.findall(text)
        if names:
            words = [ID_TOKEN if w in names else w for w in words]
        joined = " ".join(words)
        return [joined.lower() if cfg.lowercase else joined]
    if cfg.drop_layout:
        text = strip_annotations(text)
    toks = (_WORD_CASED if cfg.kind == "word" else _CODE).findall(text)
    if names:
        toks = [ID_TOKEN if t in names else t for t in toks]
    if cfg.drop_layout:  # a one-letter word other than "a" and "I" names a variable
        toks = [ID_TOKEN if len(t) == 1 and t.isalpha() and t not in "aAI" else t for t in toks]
        toks = [t for t in toks if t.lower() not in _LAYOUT]
    return [t.lower() for t in toks] if cfg.lowercase else toks


def shingles(text: str, n: int | ShingleConfig = 3) -> frozenset[str]:
    """Shingles as strings; a text shorter than n tokens is one shingle (none if empty)."""
    cfg = n if isinstance(n, ShingleConfig) else ShingleConfig(size=n)
    toks = tokens(text, cfg)
    if cfg.kind == "char":
        s = toks[0]
        if not s:
            return frozenset()
        return (
            frozenset([s])
            if len(s) < cfg.size
            else frozenset(s[i : i + cfg.size] for i in range(len(s) - cfg.size + 1))
        )
    if not toks:
        return frozenset()
    if len(toks) < cfg.size:
        return frozenset([" ".join(toks)])
    k = cfg.size
    return frozenset(" ".join(toks[i : i + k]) for i in range(len(toks) - k + 1))


def mix64(x: np.ndarray) -> np.ndarray:
    """The splitmix64 finaliser, vectorised (wrapping uint64 arithmetic)."""
    x = x ^ (x >> np.uint64(30))
    x = x * _M1
    x = x ^ (x >> np.uint64(27))
    x = x * _M2
    return x ^ (x >> np.uint64(31))


def _token_hash(tok: str) -> int:
    h = int.from_bytes(
        hashlib.blake2b(tok.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little"
    )
    if len(_TOKEN_CACHE) >= _CACHE_LIMIT:
        _TOKEN_CACHE.clear()
    _TOKEN_CACHE[tok] = h
    return h


def _token_ids(toks: list[str]) -> list[int]:
    get = _TOKEN_CACHE.get
    out = [get(t, -1) for t in toks]
    if -1 in out:
        out = [h if h != -1 else _token_hash(t) for h, t in zip(out, toks, strict=True)]
    return out


def _translation(lowercase: bool) -> bytes:
    table = bytearray(256)
    for c in b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_":
        table[c] = c + 32 if lowercase and 65 <= c <= 90 else c
    return bytes(table)


_TRANSLATE = {True: _translation(True), False: _translation(False)}
_PAD = bytes(16)
_BYTE_MASKS = np.array([(1 << (8 * n)) - 1 for n in range(8)] + [(1 << 64) - 1], dtype=np.uint64)
_CHUNK_WEIGHTS = mix64(np.arange(64, dtype=np.uint64) + np.uint64(12345)) | np.uint64(1)
_GRAM_WEIGHTS = mix64(np.arange(64, dtype=np.uint64) + np.uint64(777)) | np.uint64(1)


def _chunk_weight(c: int) -> np.uint64:
    if c < _CHUNK_WEIGHTS.size:
        return np.uint64(_CHUNK_WEIGHTS[c])
    return np.uint64(mix64(np.array([c + 12345], dtype=np.uint64))[0] | np.uint64(1))


def _word_ids_vectorised(texts: Sequence[str], lowercase: bool) -> tuple[np.ndarray, np.ndarray]:
    """Token hashes of ``[A-Za-z0-9_]+`` runs for a batch (flat) and tokens per document.

    One C pass maps the joined batch to (lowercased) word bytes and zero bytes
    (``bytes.translate``); tokens are the runs of non-zero bytes, found with numpy. A token
    hashes as ``mix(sum_c W[c] * chunk_c ^ length)`` over its little-endian 8-byte chunks
    (read straight from the buffer and masked to the token), with random odd weights ``W``:
    tokens of up to 8 bytes never collide, longer unequal ones with probability ~2^-60.
    """
    encoded = [t.encode("utf-8", "surrogatepass") for t in texts]
    sizes = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded)) + 1
    # a zero byte before every document and 16 after the last: no token touches the ends
    raw = b"\x00".join([b"", *encoded, _PAD]).translate(_TRANSLATE[lowercase])
    buf = np.frombuffer(raw, dtype=np.uint8)
    word = buf != 0
    edges = np.flatnonzero(word[1:] != word[:-1]) + 1
    starts, ends = edges[0::2], edges[1::2]
    lens = ends - starts
    doc_starts = np.cumsum(sizes) - sizes
    counts = np.diff(np.searchsorted(starts, doc_starts), append=starts.size).astype(np.int64)
    chunks = np.ndarray((buf.size - 7,), dtype="<u8", buffer=raw, strides=(1,))
    h = (chunks[starts] & _BYTE_MASKS[np.minimum(lens, 8)]) * _CHUNK_WEIGHTS[0]
    long = np.flatnonzero(lens > 8)
    c = 1
    while long.size:
        rest = lens[long] - 8 * c
        at = starts[long] + 8 * c
        part = chunks[at] & _BYTE_MASKS[np.minimum(rest, 8)]
        h[long] += part * _chunk_weight(c)
        long = long[rest > 8]
        c += 1
    return mix64(h ^ lens.astype(np.uint64)), counts


def _combine(units: np.ndarray, k: int) -> np.ndarray:
    """Hash of each window of ``k`` consecutive units (``len(units) - k + 1`` of them)."""
    m = units.size - k + 1
    h = units[:m] * _GRAM_WEIGHTS[0]
    for j in range(1, k):
        h += units[j : j + m] * _GRAM_WEIGHTS[j]
    return mix64(h ^ np.uint64(k))


def _units(texts: Sequence[str], cfg: ShingleConfig) -> tuple[np.ndarray, np.ndarray]:
    """Flat uint64 unit hashes (tokens, or code points for char) and units per document."""
    if cfg.kind == "word" and not cfg.canonical_identifiers:
        if cfg.strip_comments or cfg.strip_docstrings:
            texts = [strip_code(t, cfg.strip_comments, cfg.strip_docstrings) for t in texts]
        return _word_ids_vectorised(texts, cfg.lowercase)
    units: list[np.ndarray] = []
    for text in texts:
        toks = tokens(text, cfg)
        if cfg.kind == "char":
            raw = toks[0].encode("utf-32-le", "surrogatepass")
            units.append(mix64(np.frombuffer(raw, dtype=np.uint32).astype(np.uint64) + _GOLD))
        else:
            units.append(np.array(_token_ids(toks), dtype=np.uint64))
    counts = np.fromiter((u.size for u in units), dtype=np.int64, count=len(units))
    flat = np.concatenate(units) if units else np.zeros(0, dtype=np.uint64)
    return flat, counts


def shingle_hashes_flat(
    texts: Sequence[str], cfg: ShingleConfig = ShingleConfig()
) -> tuple[np.ndarray, np.ndarray]:
    """All shingle hashes of a batch, document after document, and how many each has.

    Not deduplicated within a document (MinHash and ``neardup.confirm_flat`` do not need
    it). A document shorter than the shingle size has one shingle: all its units.
    """
    flat, lens = _units(texts, cfg)
    k = cfg.size
    if lens.size == 0:
        return np.zeros(0, dtype=np.uint64), lens
    starts = np.cumsum(lens) - lens
    h = np.zeros(flat.size, dtype=np.uint64)
    if flat.size >= k:
        h[: flat.size - k + 1] = _combine(flat, k)
    keep = np.ones(flat.size, dtype=bool)
    # the last k-1 windows of each document run into the next one (all of a short one's)
    tail = np.minimum(lens, k - 1)
    keep[np.repeat(starts + lens - tail, tail) + _ragged_arange(tail)] = False
    for n in range(1, k):  # a document shorter than k units is one shingle of all of them
        short = starts[lens == n]
        if short.size:
            acc = flat[short] * _GRAM_WEIGHTS[0]
            for j in range(1, n):
                acc += flat[short + j] * _GRAM_WEIGHTS[j]
            h[short] = mix64(acc ^ np.uint64(n))
            keep[short] = True
    return h[keep], np.where(lens >= k, lens - k + 1, np.minimum(lens, 1))


def _ragged_arange(n: np.ndarray) -> np.ndarray:
    """``concatenate([arange(x) for x in n])`` without a Python loop."""
    total = int(n.sum())
    return np.arange(total) - np.repeat(np.cumsum(n) - n, n)


def split_flat(flat: np.ndarray, counts: np.ndarray) -> list[np.ndarray]:
    """The per-document arrays of a flat batch."""
    return np.split(flat, np.cumsum(counts)[:-1]) if counts.size else []


def shingle_hashes(
    texts: Sequence[str], cfg: ShingleConfig = ShingleConfig(), unique: bool = True
) -> list[np.ndarray]:
    """Sorted unique uint64 hashes of each text's shingles, computed for the batch at once.

    Two equal shingles (as ``shingles`` spells them) always get equal hashes; unequal ones
    collide with probability about 2^-56. Plain word shingles take a fully vectorised path.
    ``unique=False`` skips the per-document sort (MinHash does not need it).
    """
    flat, counts = shingle_hashes_flat(texts, cfg)
    parts = split_flat(flat, counts)
    return [np.unique(p) for p in parts] if unique else parts


def jaccard(a: frozenset[str] | set[str], b: frozenset[str] | set[str]) -> float:
    """Exact Jaccard similarity of two sets (two empty sets are identical)."""
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def containment(a: frozenset[str] | set[str], b: frozenset[str] | set[str]) -> float:
    """Fraction of ``a`` found in ``b``."""
    if not a:
        return 0.0
    return len(a & b) / len(a)


def overlap(a: np.ndarray, b: np.ndarray) -> int:
    """Size of the intersection of two sorted unique hash arrays."""
    return int(np.intersect1d(a, b, assume_unique=True).size)


def jaccard_hashes(a: np.ndarray, b: np.ndarray) -> float:
    """Exact Jaccard of two sorted unique hash arrays."""
    if a.size == 0 and b.size == 0:
        return 1.0
    inter = overlap(a, b)
    return inter / (a.size + b.size - inter)
