"""Data-quality suites on a real curate output: a clean run passes, each fault is caught.

Every fault is a copy of the shared run with one Parquet shard (or the manifest) rewritten;
the test names the expectation that must fail and on how many rows.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from tasksieve.pipeline.outputs.checks.run import CheckItem, check_output
from tasksieve.pipeline.outputs.layout import NotAnOutput
from tests.pipeline.gx_helpers import copy_run, curate, rewrite, set_values, shared_run

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return shared_run(tmp_path_factory)


def _find(items: tuple[CheckItem, ...], suite: str, expectation: str, column: str | None):
    found = [i for i in items if (i.suite, i.expectation, i.column) == (suite, expectation, column)]
    assert found, f"no {suite} {expectation} {column} in the results"
    return found


def test_published_run_carries_passing_checks_and_data_docs(run: Path) -> None:
    checks = json.loads((run / "checks.json").read_text())
    assert checks["success"] is True
    assert checks["results"] and all(r["success"] for r in checks["results"])
    assert (run / "gx" / "index.html").is_file()


def test_checks_json_rows_follow_the_contract(run: Path) -> None:
    checks = json.loads((run / "checks.json").read_text())
    assert set(checks) == {"success", "results"}
    for row in checks["results"]:
        assert set(row) == {
            "suite",
            "expectation",
            "column",
            "success",
            "unexpected_count",
            "element_count",
            "detail",
        }
        assert isinstance(row["suite"], str) and isinstance(row["expectation"], str)
        assert row["column"] is None or isinstance(row["column"], str)
        for key in ("unexpected_count", "element_count"):
            assert row[key] is None or isinstance(row[key], int)


def test_every_suite_ran_on_the_clean_run(run: Path) -> None:
    suites = {r["suite"] for r in json.loads((run / "checks.json").read_text())["results"]}
    assert suites == {
        "tasks.schema",
        "rejected.schema",
        "rollouts.schema",
        "tasks",
        "rejected",
        "rollouts",
        "per_task",
    }


def _first_row(value: object) -> Callable[[list[object]], list[object]]:
    return lambda old: [value, *old[1:]]


def _dup_ids(table: pa.Table) -> pa.Table:
    return set_values("id", lambda old: ["task.dup"] * len(old))(table)


def _k_above_n(table: pa.Table) -> pa.Table:
    n = table.column("n").to_pylist()
    return set_values("k", lambda old: [n[0] + 1, *old[1:]])(table)


def _ci_high_below(table: pa.Table) -> pa.Table:
    rate = table.column("pass_rate").to_pylist()
    return set_values("ci_high", lambda old: [rate[0] - 0.1, *old[1:]])(table)


def _drop_ci_low(table: pa.Table) -> pa.Table:
    return table.drop_columns(["ci_low"])


def _index_as_text(table: pa.Table) -> pa.Table:
    i = table.schema.get_field_index("sample_index")
    return table.set_column(i, "sample_index", pc.cast(table.column(i), pa.string()))


def _drop_first_row(table: pa.Table) -> pa.Table:
    return table.slice(1)


FAULTS = {
    # name: (kind, change, every shard, suite, expectation, column, failing rows)
    "duplicate id": (
        "tasks",
        _dup_ids,
        True,
        "tasks",
        "expect_column_values_to_be_unique",
        "id",
        2,
    ),
    "null prompt": (
        "tasks",
        set_values("prompt", _first_row(None)),
        False,
        "tasks",
        "expect_column_values_to_not_be_null",
        "prompt",
        1,
    ),
    "pass_rate 1.7": (
        "tasks",
        set_values("pass_rate", _first_row(1.7)),
        False,
        "tasks",
        "expect_column_values_to_be_between",
        "pass_rate",
        [1, 1],  # outside [0, 1] and outside the band
    ),
    "n < k": (
        "tasks",
        _k_above_n,
        False,
        "tasks",
        "expect_column_pair_values_a_to_be_greater_than_b",
        "n,k",
        1,
    ),
    "ci_high below pass_rate": (
        "tasks",
        _ci_high_below,
        False,
        "tasks",
        "expect_column_pair_values_a_to_be_greater_than_b",
        "ci_high,pass_rate",
        1,
    ),
    "unknown reason": (
        "rejected",
        set_values("reason", _first_row("made.up")),
        False,
        "rejected",
        "expect_column_values_to_match_regex",
        "reason",
        1,
    ),
    "rejected null stage": (
        "rejected",
        set_values("stage", _first_row(None)),
        False,
        "rejected",
        "expect_column_values_to_not_be_null",
        "stage",
        1,
    ),
    "missing column": (
        "tasks",
        _drop_ci_low,
        False,
        "tasks.schema",
        "expect_column_distinct_values_to_contain_set",
        "column",
        1,
    ),
    "wrong type": (
        "rollouts",
        _index_as_text,
        False,
        "rollouts.schema",
        "expect_column_values_to_be_in_set",
        "typed",
        1,
    ),
    "rollout of an unknown task": (
        "rollouts",
        set_values("task_id", _first_row("ghost.task")),
        False,
        "rollouts",
        "expect_column_values_to_be_in_set",
        "task_id",
        1,
    ),
    "a rollout missing": (
        "rollouts",
        _drop_first_row,
        False,
        "per_task",
        "expect_column_pair_values_to_be_equal",
        "n,rollouts",
        1,
    ),
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_fault_fails_its_expectation(run: Path, tmp_path: Path, fault: str) -> None:
    kind, change, every, suite, expectation, column, rows = FAULTS[fault]
    out = copy_run(run, tmp_path)
    rewrite(out, kind, change, every=every)
    result = check_output(out)
    assert result.success is False
    failed = [i for i in _find(result.results, suite, expectation, column) if not i.success]
    assert [i.unexpected_count for i in failed] == (rows if isinstance(rows, list) else [rows])
    assert json.loads((out / "checks.json").read_text())["success"] is False


@pytest.mark.parametrize("kind", ["kept", "rejected", "rollouts"])
def test_manifest_count_that_disagrees_fails_the_row_count(
    run: Path, tmp_path: Path, kind: str
) -> None:
    out = copy_run(run, tmp_path)
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["counts"][kind] += 1
    (out / "manifest.json").write_text(json.dumps(manifest))
    result = check_output(out)
    suite = "tasks" if kind == "kept" else kind
    (item,) = _find(result.results, suite, "expect_table_row_count_to_equal", None)
    assert not item.success
    assert f"expected {manifest['counts'][kind]}" in item.detail
    assert [i for i in result.results if not i.success] == [item]


def test_band_comes_from_the_manifest(run: Path, tmp_path: Path) -> None:
    out = copy_run(run, tmp_path)
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["config"]["band"] = {"too_hard": 0.99, "too_easy": 1.0}
    (out / "manifest.json").write_text(json.dumps(manifest))
    result = check_output(out)
    band = [
        i
        for i in _find(result.results, "tasks", "expect_column_values_to_be_between", "pass_rate")
        if "band" in i.detail
    ]
    assert [(i.success, i.unexpected_count) for i in band] == [(False, manifest["counts"]["kept"])]


def test_only_rejected_records_and_no_rollouts_pass(tmp_path: Path) -> None:
    src = tmp_path / "bad.jsonl"
    src.write_text('not json\n{"id": "x", "family": "code"}\n')
    out = tmp_path / "out"
    assert curate(src, out) == 0
    result = check_output(out)
    assert result.success, [i for i in result.results if not i.success]
    (kept,) = _find(result.results, "tasks", "expect_table_row_count_to_equal", None)
    assert "observed 0" in kept.detail


@pytest.mark.parametrize("what", ["missing dir", "no manifest", "manifest not json"])
def test_not_an_output_is_refused(tmp_path: Path, what: str) -> None:
    target = tmp_path / "x"
    if what != "missing dir":
        target.mkdir()
    if what == "manifest not json":
        (target / "manifest.json").write_text("{")
    with pytest.raises(NotAnOutput):
        check_output(target)


def test_nothing_written_outside_the_output(run: Path, tmp_path: Path) -> None:
    out = copy_run(run, tmp_path)
    before = {p for p in tmp_path.rglob("*") if not p.is_relative_to(out)}
    check_output(out)
    after = {p for p in tmp_path.rglob("*") if not p.is_relative_to(out)}
    assert after == before
    assert {p.name for p in out.iterdir()} >= {"checks.json", "gx"}


def test_failed_checks_block_publishing_and_exit_4(
    run: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from tasksieve.transforms import reasons
    from tests.pipeline.gx_helpers import PROBLEMS

    out = copy_run(run, tmp_path)
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    # Unregister a code this input produces: the run's rejected shard now breaks the registry.
    monkeypatch.setattr(reasons, "REASONS", reasons.REASONS - {"validate.schema"})
    capsys.readouterr()
    assert curate(PROBLEMS, out, "--overwrite", "--expectations") == 4
    err = " ".join(capsys.readouterr().err.split())
    after = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert after == before  # the published run is untouched
    (failed,) = tmp_path.glob("copy.failed-*")
    checks = json.loads((failed / "checks.json").read_text())
    bad = [r for r in checks["results"] if not r["success"]]
    assert [(r["suite"], r["column"], r["unexpected_count"]) for r in bad] == [
        ("rejected", "reason", 3)
    ]
    assert "expect_column_values_to_match_regex(reason) on 3 row(s)" in err
    assert str(failed) in err.replace(" ", "") or failed.name in err
    assert (failed / "manifest.json").is_file() and (failed / "gx" / "index.html").is_file()
    assert not list(tmp_path.glob(".copy.staging-*"))
