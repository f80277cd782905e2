"""TestStrength then Ambiguity, chained as the curate run chains them: weak tests win over a
disagreement of the samples, and a kept task says when agreement was not tested."""

from __future__ import annotations

import apache_beam as beam
from apache_beam.testing.test_pipeline import TestPipeline as BeamPipeline
from apache_beam.testing.util import assert_that, equal_to

from tasksieve.schemas import TaskRecord
from tasksieve.transforms.reliability.detectors import Ambiguity, TestStrength
from tasksieve.transforms.runtime.items import Item, Scored
from tasksieve.verifiers import SandboxConfig
from tasksieve.verifiers.reliability import AmbiguityConfig, StrengthConfig

SANDBOX = SandboxConfig()
MAX3 = "def max3(a, b, c):\n    if a >= b and a >= c:\n        return a\n    return max(b, c)\n"
WRONG = "def max3(a, b, c):\n    return a\n"  # passes the weak tests, disagrees elsewhere
RIGHT = "def max3(a, b, c):\n    return max(a, b, c)\n"


def _item(task_id: str, asserts: list[str]) -> Item:
    task = TaskRecord(
        id=task_id,
        family="code",
        prompt="Write max3(a, b, c): the largest of three integers.",
        reference_solution=MAX3,
        verifier={"family": "code", "style": "asserts", "entry_point": "max3", "asserts": asserts},
    )
    return Item(task, "in.jsonl", 1, "sha")


WEAK = _item("weak", ["assert max3(9, 1, 2) == 9", "assert max3(5, 4, 3) == 5"])
STRONG = _item(
    "strong",
    ["assert max3(9, 1, 2) == 9", "assert max3(1, 9, 2) == 9", "assert max3(1, 2, 9) == 9",
     "assert max3(2, 1, 9) == 9", "assert max3(3, 3, 1) == 3", "assert max3(1, 3, 3) == 3",
     "assert max3(-1, -2, -3) == -1"],
)  # fmt: skip


def _scored(item: Item) -> Scored:
    passing = [(0, WRONG), (1, RIGHT)] if item.id == "weak" else [(0, RIGHT), (1, RIGHT)]
    return Scored(item, 4, 2, "m", 4, passing=passing)


def test_weak_tests_win_and_a_lone_distinct_sample_is_not_enough_evidence() -> None:
    strength = StrengthConfig(max_mutants=8, probes=12)
    with BeamPipeline() as p:
        gated = p | beam.Create([WEAK, STRONG]) | TestStrength(strength, SANDBOX, "r")
        scored = gated["ok"] | beam.Map(_scored)
        compared = scored | Ambiguity(AmbiguityConfig(probes=12), SANDBOX, "r")
        assert_that(
            gated["rejected"] | beam.Map(lambda r: (r["record_id"], r["reason"])),
            equal_to([("weak", "gate.weak_tests")]),
            label="weak",
        )
        assert_that(
            compared["rejected"] | beam.Map(lambda r: r["record_id"]), equal_to([]), label="none"
        )
        assert_that(
            compared["ok"] | beam.Map(lambda s: (s.item.id, s.ambiguity.outcome)),
            equal_to([("strong", "not_enough_evidence")]),
            label="kept",
        )
