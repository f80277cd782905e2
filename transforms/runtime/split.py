"""Grouping only what needs a group: a side input of the keys that occur more than once.

A stage that decides per group of records with the same key (Validate's same id, ExactDedup's
same prompt) sends every record through a GroupByKey, although nearly every key is unique.
``repeated_keys`` counts the keys alone (combined per bundle before the shuffle, so only keys
and counts cross it); ``SplitFn`` then passes a record with a unique key on at once and tags the
rest ``grouped`` for the GroupByKey. A group of one is decided like a unique key, so the
decisions are those of grouping every record.

What it does NOT save: the records still cross one stage boundary (they wait for the side
input); the side input holds every repeated key on every worker, so its size grows with the
number of duplicates, not of records.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import apache_beam as beam
from apache_beam.pvalue import TaggedOutput

GROUPED = "grouped"
"""The tag of the records whose key is repeated: ``(key, record)`` pairs."""


def repeated_keys(values: beam.PCollection, label: str) -> beam.PCollection:
    """``(key, count)`` for every key that occurs more than once in ``values`` (keys only
    cross the shuffle, combined per bundle first); a side input telling a record whose key
    is unique that it needs no group."""
    return (
        values
        | f"{label}Ones" >> beam.Map(lambda key: (key, 1))
        | f"{label}Count" >> beam.CombinePerKey(sum)
        | f"{label}Repeated" >> beam.Filter(lambda kv: kv[1] > 1)
    )


class SplitFn(beam.DoFn):
    """Pass a record whose key is unique on as it is; tag the others ``grouped`` with their key.

    Only the records tagged ``grouped`` go through the GroupByKey; which way a record takes
    never changes what is decided about it (a group of one decides like a unique key)."""

    def __init__(self, key_of: Callable[[Any], Any]) -> None:
        self.key_of = key_of

    def process(self, element: Any, repeated: Mapping[Any, int]) -> Iterator[Any]:
        key = self.key_of(element)
        if key in repeated:
            yield TaggedOutput(GROUPED, (key, element))
        else:
            yield element
