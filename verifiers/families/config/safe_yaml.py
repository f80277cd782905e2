"""Bounded loading of untrusted YAML and JSON into plain data (dict, list, str, int, ...).

Caps are enforced while the input is read, before any Python object is built from it:

- bytes: the UTF-8 size of the text is checked first (``max_bytes``);
- depth: the number of nested collections (``{}``/``[]``: 1; a scalar adds nothing), checked
  as each YAML collection is opened, and by a linear bracket scan before ``json.loads``;
- nodes: every YAML node composed counts 1 and every alias counts the full size of the subtree
  it names, so ``max_nodes`` bounds the tree as any consumer would see it fully expanded
  (billion laughs, and merge-key chains ``<<: [*a, *a, ...]`` whose flattening is bounded by
  that count); an alias also counts its subtree's height against ``max_depth``.

YAML: PyYAML's composer and SafeConstructor over libyaml's C parser (the pure-Python parser
when PyYAML was built without libyaml), whose only tags are null, bool, int, float, str, seq,
map and merge (``<<``); any other tag (``!!python/object``, ``!!binary``, ``!!set``, local ``!x``)
is an error. Timestamps and ``=`` load as strings (no implicit ``date`` objects). Recursive
aliases, duplicate mapping keys and non-string keys (``on:``/``1:``; quote them) are errors.
Multi-document streams are supported; empty documents are dropped. JSON: one document, with
duplicate keys and ``NaN``/``Infinity`` rejected.

It does NOT guard against: CPU time and memory as such (no timer or rlimit is applied here;
both are bounded only through the caps: a few seconds for 100,000 nodes with libyaml on a busy
machine, several times that with the pure-Python fallback; the config verifier adds the
wall-clock bound); bugs in PyYAML or ``json`` themselves; or what callers do with the loaded
data.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.events import AliasEvent, MappingStartEvent, SequenceStartEvent
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.parser import Parser
from yaml.reader import Reader
from yaml.resolver import Resolver
from yaml.scanner import Scanner

DEFAULT_MAX_NODES = 100_000
HARD_MAX_DEPTH = 100  # keeps the recursive composer/validators far from Python's stack limit

_T = "tag:yaml.org,2002:"
_ALLOWED_TAGS = frozenset(_T + t for t in ("null", "bool", "int", "float", "str", "seq", "map"))
_MERGE = _T + "merge"
_DROPPED_RESOLVERS = frozenset({_T + "timestamp", _T + "value"})


class ConfigLoadError(ValueError):
    """The text is not loadable within the caps; the message says why (and where).

    ``limit`` names the cap that stopped it (``max_bytes``, ``max_depth``, ``max_nodes``) or is
    None for plain syntax and tag errors.
    """

    def __init__(self, message: str, limit: str | None = None) -> None:
        super().__init__(message)
        self.limit = limit


class _CoreResolver(Resolver):
    """PyYAML's safe implicit resolvers minus timestamp and ``=`` (those stay strings)."""

    yaml_implicit_resolvers = {
        first: [(tag, rx) for tag, rx in pairs if tag not in _DROPPED_RESOLVERS]
        for first, pairs in Resolver.yaml_implicit_resolvers.items()
    }


class _CappedComposer(Composer, SafeConstructor, _CoreResolver):
    """Composer and safe constructor with core tags only, counting depth and expanded nodes."""

    yaml_constructors = {
        tag: fn
        for tag, fn in SafeConstructor.yaml_constructors.items()
        if tag is None or tag in _ALLOWED_TAGS
    }
    check_event: Any  # provided by the parser half (Python Parser or libyaml's CParser)
    peek_event: Any

    def __init__(self, max_depth: int, max_nodes: int) -> None:
        Composer.__init__(self)
        SafeConstructor.__init__(self)
        _CoreResolver.__init__(self)
        self.max_depth = max_depth
        self.max_nodes = max_nodes
        self._depth = 0
        self._count = 0
        self._stats: dict[int, tuple[int, int]] = {}  # id(node) -> (expanded size, height)

    def compose_document(self) -> Node | None:
        """Compose one document with fresh per-document statistics (anchors are per document)."""
        self._stats = {}
        self._charge(1)
        node: Node | None = super().compose_document()
        return node

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        """Compose one node, enforcing the depth, node and tag caps before descending."""
        if self.check_event(AliasEvent):
            event = self.peek_event()
            target = self.anchors.get(event.anchor)
            if target is not None:
                stats = self._stats.get(id(target))
                if stats is None:
                    raise ConfigLoadError(f"recursive alias *{event.anchor} {_where(event)}")
                size, height = stats
                if self._depth + height > self.max_depth:
                    raise ConfigLoadError(
                        f"alias *{event.anchor} expands deeper than max_depth {self.max_depth}",
                        "max_depth",
                    )
                self._charge(size, event)
            node: Node | None = super().compose_node(parent, index)
            return node
        event = self.peek_event()
        collection = isinstance(event, (SequenceStartEvent, MappingStartEvent))
        if collection:
            self._depth += 1
            if self._depth > self.max_depth:
                raise ConfigLoadError(
                    f"nesting deeper than max_depth {self.max_depth} {_where(event)}", "max_depth"
                )
        try:
            node = super().compose_node(parent, index)
        finally:
            if collection:
                self._depth -= 1
        assert node is not None
        self._check_node(node)
        self._charge(1, event)
        return node

    def _check_node(self, node: Node) -> None:
        """Reject disallowed tags and bad keys; record the node's expanded size and height."""
        if node.tag not in _ALLOWED_TAGS and node.tag != _MERGE:
            raise ConfigLoadError(f"tag {node.tag!r} is not allowed {_where(node)}")
        if isinstance(node, ScalarNode):
            self._stats[id(node)] = (1, 0)
            return
        if isinstance(node, SequenceNode):
            children: list[Node] = list(node.value)
        else:
            assert isinstance(node, MappingNode)
            children = [n for pair in node.value for n in pair]
            _check_keys(node)
        stats = [self._stats[id(c)] for c in children]
        size = 1 + sum(s for s, _ in stats)
        height = 1 + max((h for _, h in stats), default=0)
        self._stats[id(node)] = (size, height)

    def _charge(self, n: int, at: Any = None) -> None:
        self._count += n
        if self._count > self.max_nodes:
            where = f" {_where(at)}" if at is not None else ""
            raise ConfigLoadError(
                f"more than {self.max_nodes} nodes once aliases are expanded{where}", "max_nodes"
            )


class PyCappedLoader(Reader, Scanner, Parser, _CappedComposer):
    """The capped loader on PyYAML's pure-Python scanner and parser (fallback)."""

    def __init__(self, text: str, max_depth: int, max_nodes: int) -> None:
        Reader.__init__(self, text)
        Scanner.__init__(self)
        Parser.__init__(self)
        _CappedComposer.__init__(self, max_depth, max_nodes)


@functools.cache
def _c_loader_class() -> type | None:
    """The capped loader class on libyaml's C parser, or None when PyYAML lacks libyaml."""
    try:
        from yaml._yaml import CParser
    except ImportError:
        return None

    class CCappedLoader(_CappedComposer, CParser):
        """The capped loader on libyaml's scanner and parser (fast; nesting capped at 1000)."""

        def __init__(self, text: str, max_depth: int, max_nodes: int) -> None:
            CParser.__init__(self, text)
            _CappedComposer.__init__(self, max_depth, max_nodes)

    return CCappedLoader


def _make_loader(text: str, max_depth: int, max_nodes: int) -> Any:
    """The capped loader on libyaml's C parser when PyYAML has it, else the Python one."""
    cls = _c_loader_class() or PyCappedLoader
    return cls(text, max_depth, max_nodes)


def _check_keys(node: MappingNode) -> None:
    seen: set[str] = set()
    for key, _ in node.value:
        if not isinstance(key, ScalarNode) or key.tag not in (_T + "str", _MERGE):
            shown = key.value if isinstance(key, ScalarNode) else key.id
            raise ConfigLoadError(f"mapping key {shown!r} is not a string (quote it) {_where(key)}")
        if key.tag == _MERGE:
            continue
        if key.value in seen:
            raise ConfigLoadError(f"duplicate key {key.value!r} {_where(key)}")
        seen.add(key.value)


def _where(thing: Any) -> str:
    mark = getattr(thing, "start_mark", None)
    return f"at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""


def check_bytes(text: str, max_bytes: int) -> None:
    """Raise ConfigLoadError (``max_bytes``) if ``text`` is longer than ``max_bytes`` in UTF-8."""
    if len(text) > max_bytes or len(text.encode("utf-8", "surrogatepass")) > max_bytes:
        raise ConfigLoadError(f"document larger than max_bytes {max_bytes}", "max_bytes")


def load_yaml(
    text: str, max_bytes: int, max_depth: int, max_nodes: int = DEFAULT_MAX_NODES
) -> list[Any]:
    """All non-empty documents of a YAML stream, loaded within the caps."""
    check_bytes(text, max_bytes)
    docs: list[Any] = []
    loader = None
    try:
        loader = _make_loader(text, min(max_depth, HARD_MAX_DEPTH), max_nodes)
        while loader.check_data():
            doc = loader.get_data()
            if doc is not None:
                docs.append(doc)
    except yaml.YAMLError as e:
        raise ConfigLoadError(" ".join(str(e).split())[:300]) from None
    except RecursionError:
        raise ConfigLoadError("nesting too deep", "max_depth") from None
    finally:
        if loader is not None:
            loader.dispose()
    return docs


_JSON_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"?|[\[{]|[\]}]', re.DOTALL)


def json_depth(text: str, limit: int) -> int:
    """Maximum bracket nesting of JSON text (strings skipped); stops early past ``limit``."""
    depth = deepest = 0
    for m in _JSON_TOKENS.finditer(text):
        c = m.group()[0]
        if c in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > limit:
                    break
        elif c in "]}":
            depth -= 1
    return deepest


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ConfigLoadError(f"duplicate key {key!r}")
        out[key] = value
    return out


def _no_constant(name: str) -> Any:
    raise ConfigLoadError(f"{name} is not valid JSON")


def load_json(text: str, max_bytes: int, max_depth: int) -> list[Any]:
    """The one JSON document in ``text`` (as a one-item list), loaded within the caps."""
    check_bytes(text, max_bytes)
    limit = min(max_depth, HARD_MAX_DEPTH)
    if json_depth(text, limit) > limit:
        raise ConfigLoadError(f"nesting deeper than max_depth {limit}", "max_depth")
    if not text.strip():
        raise ConfigLoadError("empty document")
    try:
        doc = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except json.JSONDecodeError as e:
        raise ConfigLoadError(f"invalid JSON: {e}") from None
    except (ValueError, RecursionError) as e:  # e.g. ints over sys.get_int_max_str_digits()
        raise ConfigLoadError(f"invalid JSON: {e}"[:300]) from None
    return [doc]


def load_documents(
    text: str, fmt: str, max_bytes: int, max_depth: int, max_nodes: int = DEFAULT_MAX_NODES
) -> list[Any]:
    """Load ``text`` as ``fmt`` ("yaml" or "json") within the caps; raises ConfigLoadError."""
    if fmt == "json":
        return load_json(text, max_bytes, max_depth)
    return load_yaml(text, max_bytes, max_depth, max_nodes)
