"""Connected components of an undirected graph on Beam, for near-dedup's clusters.

``Components(rounds)`` takes ``(a, b)`` edges and gives ``(node, label)`` for every node, the
label being the smallest node of its component. It runs ``rounds`` rounds of min-label
propagation, each followed by pointer jumping (label := label of my label); propagation alone
needs diameter rounds, with jumping a label travels roughly twice as far per round. Whatever
has not settled then (edges whose ends still disagree) is finished exactly by a union-find
over those residual edges on one worker, so the result never depends on ``rounds``.

What it does NOT bound: the residual union-find holds every residual edge on one worker (none
for clusters of diameter below about 2^rounds); nodes must be hashable and ordered.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import apache_beam as beam

from tasksieve.transforms.runtime.common import count

Node = Any
"""A node of the graph: any hashable, ordered value (near-dedup's are ``near.Key`` tuples)."""


def _send(kv: tuple[Node, dict[str, list[Any]]]) -> Iterator[tuple[Node, Node]]:
    label = min(kv[1]["label"])
    yield (kv[0], label)
    for nbrs in kv[1]["adj"]:
        for n in nbrs:
            yield (n, label)


def _jump(kv: tuple[Node, dict[str, list[Any]]]) -> Iterator[tuple[Node, Node]]:
    mine = kv[1]["label"]
    for member in kv[1]["members"]:
        yield (member, min([kv[0], *mine]))


def _residual(kv: tuple[Node, dict[str, list[Any]]]) -> Iterator[tuple[Node, Node]]:
    own = min(kv[1]["label"])
    for other in set(kv[1]["msg"]):
        if other != own:
            count("near_dedup.residual_edges")
            yield (own, other)


def union_labels(pairs: list[tuple[Node, Node]]) -> dict[Node, Node]:
    """Root (smallest key) of every label that appears in a residual edge."""
    parent: dict[Node, Node] = {}

    def find(x: Node) -> Node:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in pairs:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    return {x: find(x) for x in list(parent)}


class Components(beam.PTransform):
    """(node, label) for every node of an undirected graph given as (a, b) edges."""

    def __init__(self, rounds: int) -> None:
        super().__init__()
        self.rounds = rounds

    def expand(self, edges: beam.PCollection) -> beam.PCollection:
        adj = (
            edges
            | "BothWays" >> beam.FlatMap(lambda e: [(e[0], e[1]), (e[1], e[0])])
            | "Adjacency" >> beam.GroupByKey()
            | "Sorted" >> beam.MapTuple(lambda n, ms: (n, sorted(set(ms))))
        )
        labels = adj | "Init" >> beam.MapTuple(lambda n, ms: (n, min(n, ms[0])))
        for r in range(self.rounds):
            labels = (
                {"adj": adj, "label": labels}
                | f"Join{r}" >> beam.CoGroupByKey()
                | f"Send{r}" >> beam.FlatMap(_send)
                | f"Min{r}" >> beam.CombinePerKey(min)
            )
            labels = (
                {"members": labels | f"ByLabel{r}" >> beam.KvSwap(), "label": labels}
                | f"JumpJoin{r}" >> beam.CoGroupByKey()
                | f"Jump{r}" >> beam.FlatMap(_jump)
            )
        msgs = (
            {"adj": adj, "label": labels}
            | "CheckJoin" >> beam.CoGroupByKey()
            | "CheckSend" >> beam.FlatMap(_send)
        )
        residual = (
            {"label": labels, "msg": msgs}
            | "Residual" >> beam.CoGroupByKey()
            | "Disagree" >> beam.FlatMap(_residual)
            | "CollectResidual" >> beam.combiners.ToList()
            | "UnionFind" >> beam.Map(union_labels)
        )
        return labels | "Finish" >> beam.Map(
            lambda kv, roots: (kv[0], roots.get(kv[1], kv[1])), beam.pvalue.AsSingleton(residual)
        )
