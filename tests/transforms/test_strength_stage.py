"""TestStrength and Ambiguity as Beam transforms on the DirectRunner, and their curate flags."""

from __future__ import annotations

import argparse
from pathlib import Path

import apache_beam as beam
import pytest
from apache_beam.testing.test_pipeline import TestPipeline as BeamPipeline
from apache_beam.testing.util import assert_that, equal_to

from tasksieve.pipeline.curate.stage_counts import ChannelReader, curate_stages, stage_views
from tasksieve.pipeline.flags.reliability import (
    DEFAULTS,
    add_reliability_flags,
    ambiguity_config,
    strength_config,
)
from tasksieve.schemas import CuratedTask, TaskRecord
from tasksieve.transforms.filter import curated_row
from tasksieve.transforms.reliability.detectors import Ambiguity, TestStrength
from tasksieve.transforms.runtime import progress
from tasksieve.transforms.runtime.items import Item, Scored
from tasksieve.verifiers import SandboxConfig
from tasksieve.verifiers.reliability import AmbiguityConfig, StrengthConfig

SANDBOX = SandboxConfig()
ADULT = "def is_adult(age):\n    return age >= 18\n"
MIDDLE = "def middle(xs):\n    return xs[len(xs) // 2]\n"
MIDDLE_LOW = "def middle(xs):\n    return xs[(len(xs) - 1) // 2]\n"


def _item(task_id: str, ref: str, entry: str, asserts: list[str]) -> Item:
    task = TaskRecord(
        id=task_id,
        family="code",
        prompt=f"Write {entry} ({task_id}).",
        reference_solution=ref,
        verifier={"family": "code", "style": "asserts", "entry_point": entry, "asserts": asserts},
    )
    return Item(task, "in.jsonl", 1, "sha")


WEAK = _item("weak", ADULT, "is_adult", ["assert is_adult(40)", "assert not is_adult(17)"])
STRONG = _item("strong", ADULT, "is_adult", ["assert is_adult(18)", "assert not is_adult(17)"])
MIDDLE_ITEM = _item("mid", MIDDLE, "middle", ["assert middle([1, 2, 3]) == 2"] * 3)


def _progress(p: BeamPipeline, channel: Path, label: str, tasks: int) -> tuple[int, int | None]:
    """Run ``p`` reporting to a progress channel; done and total the display shows for ``label``."""
    progress.use(str(channel))
    try:
        p.run().wait_until_finish()
        progress.flush()
    finally:
        progress.use(None)
    reader = ChannelReader(str(channel))
    reader.poll()
    counters = {**reader.counters, "ingest.records": tasks, "validate.ok": tasks}
    views = stage_views(curate_stages(strength=True, ambiguity=True), counters, k=4)
    view = next(v for v in views if v.spec.label == label)
    return view.done, view.total


def test_weak_tests_are_rejected_with_a_survivor_and_strong_ones_kept(tmp_path: Path) -> None:
    cfg = StrengthConfig(max_mutants=6, probes=12)
    p = BeamPipeline()
    out = p | beam.Create([WEAK, STRONG]) | TestStrength(cfg, SANDBOX, "run1")
    assert_that(
        out["ok"] | beam.Map(lambda it: (it.id, it.strength.score, it.strength.survived)),
        equal_to([("strong", 1.0, 0)]),
        label="kept",
    )
    assert_that(
        out["rejected"]
        | beam.Map(
            lambda r: (r["record_id"], r["stage"], r["reason"], "is_adult(18)" in r["detail"])
        ),
        equal_to([("weak", "test_strength", "gate.weak_tests", True)]),
        label="rejected",
    )
    # a task measured and then rejected is one task done, not two
    assert _progress(p, tmp_path, "Test strength", 2) == (2, 2)


def test_the_kept_row_carries_the_strength_and_ambiguity_columns() -> None:
    from tasksieve.schemas import AmbiguityCheck, StrengthCheck

    item = Item(STRONG.task, "in.jsonl", 1, "sha", strength=StrengthCheck(
        made=3, killed=3, survived=0, equivalent=0, score=1.0
    ))  # fmt: skip
    amb = AmbiguityCheck(probes_tried=5, probes_valid=4, probes_agreed=4, solutions=2)
    row = curated_row(Scored(item, 4, 2, "m", 4, ambiguity=amb), "run1", "fp", "keep")
    back = CuratedTask.model_validate(row)
    assert back.test_strength == item.strength and back.ambiguity == amb


def test_ambiguous_task_is_rejected_with_the_disagreeing_sample(tmp_path: Path) -> None:
    two = Scored(MIDDLE_ITEM, 4, 3, "m", 4, passing=[(0, MIDDLE), (1, MIDDLE_LOW), (3, MIDDLE)])
    one = Scored(
        _item("mid2", MIDDLE, "middle", ["assert middle([1, 2, 3]) == 2"] * 3),
        4,
        2,
        "m",
        4,
        passing=[(0, MIDDLE), (2, "def middle(xs):\n    i = len(xs) // 2\n    return xs[i]\n")],
    )
    p = BeamPipeline()
    out = p | beam.Create([two, one]) | Ambiguity(AmbiguityConfig(probes=12), SANDBOX, "r")
    agreed = out["ok"] | beam.Map(
        lambda s: (s.item.id, s.ambiguity.probes_agreed == s.ambiguity.probes_valid)
    )
    assert_that(
        agreed,
        equal_to([("mid2", True)]),
        label="kept",
    )
    assert_that(
        out["rejected"]
        | beam.Map(lambda r: (r["record_id"], r["reason"], r["k"], "sample 1:" in r["detail"])),
        equal_to([("mid", "filter.ambiguous", 3, True)]),
        label="rejected",
    )
    assert _progress(p, tmp_path, "Ambiguity", 2) == (2, 2)


def _args(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_reliability_flags(p)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(list(argv))


def test_flags_turn_each_detector_off() -> None:
    assert strength_config(_args(), 2).enabled and ambiguity_config(_args()).enabled
    assert not strength_config(_args("--no-weak-tests"), 2).enabled
    assert ambiguity_config(_args("--no-weak-tests")).enabled
    assert not ambiguity_config(_args("--no-ambiguity")).enabled
    assert strength_config(_args("--no-ambiguity"), 2).enabled


def test_flags_set_the_configs_and_unset_flags_keep_the_documented_defaults() -> None:
    s = strength_config(_args("--min-mutation-score", "0.5", "--max-mutants", "4"), 3)
    a = ambiguity_config(_args("--ambiguity-threshold", "0.25", "--probes", "7"))
    assert (s.min_score, s.max_mutants, s.workers, a.threshold, a.probes) == (0.5, 4, 3, 0.25, 7)
    d_s, d_a = strength_config(_args(), 2), ambiguity_config(_args())
    got = {"min_score": d_s.min_score, "max_mutants": d_s.max_mutants}
    got |= {"probes": d_s.probes, "threshold": d_a.threshold}
    assert got == DEFAULTS
    assert (StrengthConfig().min_score, AmbiguityConfig().threshold) == (
        DEFAULTS["min_score"],
        DEFAULTS["threshold"],
    )


@pytest.mark.parametrize(
    "argv",
    [
        ("--min-mutation-score", "1.5"),
        ("--max-mutants", "0"),
        ("--ambiguity-threshold", "1"),
        ("--probes", "0"),
    ],
)
def test_bad_values_fail_with_a_message(argv: tuple[str, ...]) -> None:
    with pytest.raises(ValueError, match="got"):
        strength_config(_args(*argv), 2)
        ambiguity_config(_args(*argv))


def test_a_family_without_a_differ_passes_through_unmeasured() -> None:
    from tasksieve.verifiers.registry import get_differ

    try:
        get_differ("sql")
    except ImportError:
        pass
    else:
        pytest.skip("the sql family has a differ now; this case no longer applies")
    sql = TaskRecord(
        id="q",
        family="sql",
        prompt="Count.",
        reference_solution="SELECT 1",
        verifier={"family": "sql", "setup_sql": "SELECT 1", "expected_rows": [[1]]},
    )
    with BeamPipeline() as p:
        out = (
            p
            | beam.Create([Item(sql, "in.jsonl", 1, "sha")])
            | TestStrength(StrengthConfig(max_mutants=2), SANDBOX, "r")
        )
        assert_that(out["ok"] | beam.Map(lambda it: (it.id, it.strength)), equal_to([("q", None)]))
