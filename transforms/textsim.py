"""Normalisation and shingling for code and prose: the plain functions behind dedup and decontam.

A text becomes tokens (``tokens``), tokens become shingles (word n-grams, code-token n-grams
or character n-grams), and shingles become 64-bit hashes (``shingle_hashes``, vectorised over
a batch with numpy). ``shingles`` returns the same shingles as strings, for tests, ground truth
and small sets. Normalisation folds case and whitespace, can drop comments (``#``, ``//`` and
``--`` that start a line or follow a space) and triple-quoted docstrings, and can replace
code identifiers with one placeholder so renamed variables and functions still match.

Not guarded against: identifier detection is lexical (names that are called, defined with
``def``/``class``, parameters of a ``def``, assigned at a line start, ``for`` targets, or
spelled with ``_``, digits or camelCase), so a renamed plain English word stays a changed
word; comment stripping does not parse strings, so a ``#`` after a space inside a string
literal ends that line's text.
"""

from __future__ import annotations

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


def identifier_names(text: str) -> frozenset[str]:
    """Names that look like code identifiers: called, defined, def parameters or code-spelled."""
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
    toks = (_WORD_CASED if cfg.kind == "word" else _CODE).findall(text)
    if names:
        toks = [ID_TOKEN if t in names else t for t in toks]
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


_IS_WORD = np.zeros(256, dtype=bool)
_IS_WORD[list(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")] = True
_LOWER = np.arange(256, dtype=np.uint64)
_LOWER[65:91] += 32
_KEEP_CASE = np.arange(256, dtype=np.uint64)
_POS_WEIGHTS = mix64(np.arange(256, dtype=np.uint64) + np.uint64(12345)) | np.uint64(1)


def _word_ids_vectorised(texts: Sequence[str], lowercase: bool) -> list[np.ndarray]:
    """Token hashes of ``[A-Za-z0-9_]+`` runs for a batch, with no per-token Python.

    A token hashes as ``mix(sum_j W[j mod 256] * (byte_j + 1) ^ length)`` with random odd
    weights ``W``: equal tokens hash equally, unequal ones collide with probability ~2^-56.
    """
    parts = [t.encode("utf-8", "surrogatepass") for t in texts]
    buf = np.frombuffer(b"\x00".join(parts), dtype=np.uint8)
    word = _IS_WORD[buf]
    edge = np.diff(word.view(np.int8), prepend=np.int8(0), append=np.int8(0))
    start_pos = np.flatnonzero(edge == 1)
    lens = np.flatnonzero(edge == -1) - start_pos
    wpos = np.flatnonzero(word)
    first = np.cumsum(lens) - lens
    offset = np.arange(wpos.size) - np.repeat(first, lens)
    table = _LOWER if lowercase else _KEEP_CASE
    vals = _POS_WEIGHTS[offset & 255] * (table[buf[wpos]] + np.uint64(1))
    tok = mix64(np.add.reduceat(vals, first) ^ lens.astype(np.uint64)) if wpos.size else vals
    sizes = np.fromiter((len(p) + 1 for p in parts), dtype=np.int64, count=len(parts))
    cuts = np.searchsorted(start_pos, np.cumsum(sizes)[:-1])
    return np.split(tok, cuts)


def shingle_hashes(
    texts: Sequence[str], cfg: ShingleConfig = ShingleConfig(), unique: bool = True
) -> list[np.ndarray]:
    """Sorted unique uint64 hashes of each text's shingles, computed for the batch at once.

    Two equal shingles (as ``shingles`` spells them) always get equal hashes; unequal ones
    collide with probability about 2^-56. Plain word shingles take a fully vectorised path.
    ``unique=False`` skips the per-document sort (MinHash does not need it).
    """
    units: list[np.ndarray] = []
    if cfg.kind == "word" and not cfg.canonical_identifiers:
        if cfg.strip_comments or cfg.strip_docstrings:
            texts = [strip_code(t, cfg.strip_comments, cfg.strip_docstrings) for t in texts]
        units = _word_ids_vectorised(texts, cfg.lowercase) if texts else []
        texts = []
    for text in texts:
        toks = tokens(text, cfg)
        if cfg.kind == "char":
            raw = toks[0].encode("utf-32-le", "surrogatepass")
            units.append(np.frombuffer(raw, dtype=np.uint32).astype(np.uint64))
        else:
            units.append(np.array(_token_ids(toks), dtype=np.uint64))
    if not units:
        return []
    lens = np.fromiter((len(u) for u in units), dtype=np.int64, count=len(units))
    flat = np.concatenate(units)
    if cfg.kind == "char":
        flat = mix64(flat + _GOLD)
    k = cfg.size
    ends = np.cumsum(lens)
    total = len(flat)
    h = flat[: max(0, total - k + 1)].copy()
    for j in range(1, k if total >= k else 0):
        h = mix64(h * _GOLD + flat[j : total - k + 1 + j])
    out: list[np.ndarray] = []
    for e, n in zip(ends.tolist(), lens.tolist(), strict=True):
        s = e - n
        if n >= k:
            out.append(np.unique(h[s : e - k + 1]) if unique else h[s : e - k + 1])
        elif n > 0:
            g = flat[s : s + 1].copy()
            for j in range(s + 1, e):
                g = mix64(g * _GOLD + flat[j : j + 1])
            out.append(mix64(g ^ np.uint64(n)))
        else:
            out.append(np.zeros(0, dtype=np.uint64))
    return out


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
