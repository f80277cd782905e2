"""A record on which a stage raises ends as one ``<stage>.error`` rejection; the run succeeds.

One curate run plants a crash in every stage at once, each for its own record (the stage's
plain function is patched to raise for that record only), next to a run without crashes on
the same input. Every record is kept by the clean run, so each planted record reaches its
stage; the test per stage then checks that record's single rejection, and the bystanders
are compared with the clean run.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

import tasksieve.transforms.dedup.exact
import tasksieve.transforms.dedup.near
import tasksieve.transforms.filter
import tasksieve.transforms.ingest.validate
import tasksieve.transforms.reliability.cached
import tasksieve.transforms.reliability.gates
import tasksieve.transforms.rollouts.rounds
from tasksieve.pipeline.cli import main
from tasksieve.transforms.decontam.sets import ContaminationIndex
from tasksieve.transforms.reasons import GUARDED
from tasksieve.transforms.samplers.replay import ReplayModelHandler

# name -> (what the function does, its body, three inputs and outputs for the asserts)
FUNCS: dict[str, tuple[str, str, list[tuple[int, Any]]]] = {
    "double": ("returns twice its argument", "x * 2", [(3, 6), (-4, -8), (7, 14)]),
    "square": ("multiplies a number by itself", "x * x", [(3, 9), (-4, 16), (5, 25)]),
    "negate": ("flips the sign of an integer", "-x", [(3, -3), (-4, 4), (9, -9)]),
    "succ": ("adds one to a counter value", "x + 1", [(3, 4), (-4, -3), (9, 10)]),
    "pred": ("gives the integer just below its input", "x - 1", [(3, 2), (-4, -5), (9, 8)]),
    "halve": ("floor-divides a value by two", "x // 2", [(7, 3), (-4, -2), (9, 4)]),
    "triple": ("computes three times a quantity", "3 * x", [(3, 9), (-4, -12), (5, 15)]),
    "cube": ("raises a number to the third power", "x ** 3", [(3, 27), (-2, -8), (4, 64)]),
    "magnitude": ("returns the absolute value", "abs(x)", [(3, 3), (-4, 4), (-9, 9)]),
    "positive": ("tells whether a number exceeds zero", "x > 0", [(3, True), (-4, False)]),
    "parity": ("reports the remainder modulo two", "x % 2", [(3, 1), (-4, 0), (9, 1)]),
    "clamp": ("limits a reading to 0..10", "max(0, min(10, x))", [(30, 10), (-4, 0), (5, 5)]),
    "lastdigit": ("extracts the final decimal digit", "abs(x) % 10", [(37, 7), (-4, 4), (9, 9)]),
    "tenfold": ("scales a measurement by ten", "10 * x", [(3, 30), (-4, -40), (9, 90)]),
}
STAGES = GUARDED  # every stage whose per-record steps are dead-lettered
SAMPLER = "sampler"
PLANTED = dict(zip((*STAGES, SAMPLER), FUNCS, strict=False))  # stage -> the task it crashes on
BYSTANDERS = [name for name in FUNCS if name not in PLANTED.values()]


def _task(name: str) -> dict[str, Any]:
    what, body, cases = FUNCS[name]
    if name == "positive":
        cases = [*cases, (0, False)]
    return {
        "id": f"t.{name}",
        "family": "code",
        "prompt": f"Write a Python function `{name}(x)` that {what}. Call it {name}.",
        "verifier": {
            "family": "code",
            "style": "asserts",
            "entry_point": name,
            "asserts": [f"assert {name}({a!r}) == {b!r}" for a, b in cases],
        },
        "reference_solution": f"def {name}(x):\n    return {body}\n",
    }


def _inputs(dest: Path) -> tuple[Path, Path]:
    tasks = dest / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(_task(name)) + "\n" for name in FUNCS))
    replay = dest / "replay.jsonl"
    rows = []
    for name in FUNCS:  # two right, two wrong: pass rate 1/2, kept by the default band
        right = f"```python\n{_task(name)['reference_solution']}```"
        wrong = f"```python\ndef {name}(x):\n    return 12345\n```"
        rows += [{"task_id": f"t.{name}", "completion": c} for c in (right, wrong, right, wrong)]
    replay.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return tasks, replay


def _curate(tmp: Path, name: str) -> Path:
    tasks, replay = _inputs(tmp)
    out = tmp / name
    argv = ["curate", "--input", str(tasks), "--output", str(out), "--sampler", "replay"]
    argv += ["--replay", str(replay), "--samples", "4", "--quiet", "--no-humaneval"]
    argv += ["--no-expectations", "--reference-runs", "1", "--max-mutants", "3", "--probes", "4"]
    argv += ["--min-mutation-score", "0"]
    assert main(argv) == 0
    return out


def _raises_for(stage: str, real: Callable[..., Any], hit: Callable[..., bool]) -> Any:
    """``real``, except that it raises when ``hit`` says the call is the planted record's."""

    def planted(*args: Any, **kwargs: Any) -> Any:
        if hit(*args, **kwargs):
            raise RuntimeError(f"planted crash in {stage}")
        return real(*args, **kwargs)

    return planted


def _plant(mp: pytest.MonkeyPatch) -> None:
    """Patch each stage's plain function to raise for that stage's record only."""
    t = {stage: f"t.{name}" for stage, name in PLANTED.items()}
    prompt = {stage: _task(name)["prompt"] for stage, name in PLANTED.items()}
    hits: list[tuple[Any, str, str, Callable[..., bool]]] = [
        (
            tasksieve.transforms.ingest.validate,
            "validate_record",
            "validate",
            lambda f, n, d, e: d["id"] == t["validate"],
        ),
        (
            tasksieve.transforms.dedup.exact,
            "prompt_key",
            "exact_dedup",
            lambda it: it.id == t["exact_dedup"],
        ),
        (
            tasksieve.transforms.dedup.near,
            "shingle_hashes",
            "near_dedup",
            lambda texts, cfg: prompt["near_dedup"] in texts,
        ),
        (
            ContaminationIndex,
            "check",
            "decontaminate",
            lambda self, p: p == prompt["decontaminate"],
        ),
        (
            tasksieve.transforms.reliability.gates,
            "run_gates",
            "gates",
            lambda it, *a: it.id == t["gates"],
        ),
        (
            tasksieve.transforms.reliability.cached,
            "measure_strength",
            "test_strength",
            lambda task, *a: task.id == t["test_strength"],
        ),
        (
            tasksieve.transforms.rollouts.rounds,
            "count_shortfall",
            "rollouts",
            lambda s: s.task_id == t["rollouts"],
        ),
        # verify: the last sample's rollout row, after the rows of the earlier samples
        (
            tasksieve.transforms.rollouts.rounds,
            "Rollout",
            "verify",
            lambda **kw: kw["task_id"] == t["verify"] and kw["sample_index"] == 3,
        ),
        (
            tasksieve.transforms.reliability.cached,
            "measure_ambiguity",
            "ambiguity",
            lambda task, *a: task.id == t["ambiguity"],
        ),
        (
            tasksieve.transforms.filter,
            "curated_row",
            "filter",
            lambda s, *a: s.item.id == t["filter"],
        ),
        (
            ReplayModelHandler,
            "run_inference",
            SAMPLER,
            lambda self, batch, *a: any(r.task_id == t[SAMPLER] for r in batch),
        ),
    ]
    for owner, attr, stage, hit in hits:
        mp.setattr(owner, attr, _raises_for(stage, getattr(owner, attr), hit))


def _rows(out: Path, sub: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for f in sorted((out / sub).rglob("*.parquet")):
        rows.extend(pq.read_table(f).to_pylist())
    return rows


def _outcomes(out: Path) -> dict[str, str]:
    """Task id -> ``kept`` or its rejection reason (several reasons joined by ``+``)."""
    found: dict[str, list[str]] = {}
    for row in _rows(out, "tasks"):
        found.setdefault(row["id"], []).append("kept")
    for row in _rows(out, "rejected"):
        found.setdefault(row["record_id"], []).append(row["reason"])
    return {k: "+".join(sorted(v)) for k, v in found.items()}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """(clean run, run with a crash planted in every stage) on the same input."""
    tmp = tmp_path_factory.mktemp("faults")
    clean = _curate(tmp, "clean")
    with pytest.MonkeyPatch.context() as mp:
        _plant(mp)
        crashed = _curate(tmp, "crashed")
    yield clean, crashed


def test_every_record_is_kept_without_crashes(runs: tuple[Path, Path]) -> None:
    assert _outcomes(runs[0]) == {f"t.{name}": "kept" for name in FUNCS}


@pytest.mark.parametrize("stage", STAGES)
def test_a_crash_rejects_its_record_once_with_the_stage_and_error(
    runs: tuple[Path, Path], stage: str
) -> None:
    task_id = f"t.{PLANTED[stage]}"
    rows = [r for r in _rows(runs[1], "rejected") if r["record_id"] == task_id]
    assert [(r["stage"], r["reason"]) for r in rows] == [(stage, f"{stage}.error")]
    assert f"RuntimeError: planted crash in {stage}" in rows[0]["detail"]
    assert "traceback" in rows[0]["detail"]
    assert task_id not in {r["id"] for r in _rows(runs[1], "tasks")}


def test_a_sampler_crash_rejects_only_its_task_as_a_sampler_error(
    runs: tuple[Path, Path],
) -> None:
    task_id = f"t.{PLANTED[SAMPLER]}"
    rows = [r for r in _rows(runs[1], "rejected") if r["record_id"] == task_id]
    assert [(r["stage"], r["reason"]) for r in rows] == [("rollouts", "rollouts.sampler_error")]
    assert f"RuntimeError: planted crash in {SAMPLER}" in rows[0]["detail"]


def test_bystanders_are_unaffected(runs: tuple[Path, Path]) -> None:
    clean, crashed = (_outcomes(r) for r in runs)
    assert {t: crashed[f"t.{t}"] for t in BYSTANDERS} == {t: clean[f"t.{t}"] for t in BYSTANDERS}


def test_a_verify_crash_leaves_no_rollout_rows_of_its_task(runs: tuple[Path, Path]) -> None:
    task_ids = {r["task_id"] for r in _rows(runs[1], "rollouts")}
    assert f"t.{PLANTED['verify']}" not in task_ids
    assert {f"t.{name}" for name in BYSTANDERS} <= task_ids


def test_conservation_holds_and_errors_are_counted(runs: tuple[Path, Path]) -> None:
    manifest = json.loads((runs[1] / "manifest.json").read_text())
    counts = manifest["counts"]
    assert counts["input"] == len(FUNCS) == counts["kept"] + counts["rejected"]
    assert counts["kept"] == len(BYSTANDERS)
    counters = manifest["stage_counters"]
    assert {s: counters.get(f"{s}.errors") for s in STAGES} == dict.fromkeys(STAGES, 1)
    assert counters.get("rollouts.sampler_errors") == 1
