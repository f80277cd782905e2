"""The DuckDB catalog over a real curate output: views, typed verifiers, macros, location.

One replay-sampler curate run over a subset of the examples is shared by the module (it
writes ``catalog.duckdb`` in its staging directory, as every run does); a second run keeps
nothing. Every expected value is computed here in Python from the Parquet shards and the
manifest.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.parquet as pq
import pytest

from tasksieve.pipeline.outputs.catalog.duck_types import FAMILY_SPECS, merged_fields
from tasksieve.pipeline.outputs.catalog.sql import MACROS, STAGES, VIEWS
from tasksieve.pipeline.outputs.catalog.views import (
    CATALOG_FILE,
    connect,
    write_catalog,
)
from tasksieve.pipeline.outputs.layout import NotAnOutput
from tasksieve.schemas import FAMILIES, CodeSpec
from tests.pipeline.catalog_runs import (
    ALL_REJECTED,
    SUBSET,
    curate_lines,
    manifest,
    parquet_rows,
)

# Stage -> the counter the pipeline itself keeps of the records that passed it.
PASSED_COUNTER = {
    "validate": "validate.ok",
    "exact_dedup": "exact_dedup.kept",
    "near_dedup": "near_dedup.kept",
    "decontaminate": "decontaminate.clean",
    "gates": "gates.passed",
    "filter": "filter.kept",
}


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return curate_lines(tmp_path_factory.mktemp("catalog"), SUBSET)


@pytest.fixture(scope="module")
def con(out: Path) -> duckdb.DuckDBPyConnection:
    return connect(out)


@pytest.fixture(scope="module")
def all_rejected(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return curate_lines(tmp_path_factory.mktemp("rejected-only"), ALL_REJECTED)


def dicts(con: duckdb.DuckDBPyConnection, sql: str) -> list[dict[str, Any]]:
    rel = con.sql(sql)
    return [dict(zip(rel.columns, row, strict=True)) for row in rel.fetchall()]


def count(con: duckdb.DuckDBPyConnection, sql: str) -> int:
    ((value,),) = con.sql(sql).fetchall()
    return int(value)


def duckdb_cli() -> str | None:
    beside = Path(sys.executable).parent / "duckdb"
    return shutil.which("duckdb") or (str(beside) if beside.exists() else None)


# ----------------------------------------------------------------------------- views


@pytest.mark.parametrize("view", ["tasks", "rejected", "rollouts"])
def test_view_rows_equal_the_parquet_rows_and_the_manifest(
    con: duckdb.DuckDBPyConnection, out: Path, view: str
) -> None:
    n = count(con, f"select count(*) from {view}")
    assert n == len(parquet_rows(out, view))
    assert n == manifest(out)["counts"]["kept" if view == "tasks" else view]


def test_the_subset_run_has_rows_of_every_kind(con: duckdb.DuckDBPyConnection) -> None:
    families = {r["family"] for r in dicts(con, "select distinct family from tasks")}
    assert families == set(FAMILIES)  # so every typed-verifier test below sees rows
    assert count(con, "select count(*) from rollouts") > 0


def test_runs_is_the_manifest(con: duckdb.DuckDBPyConnection, out: Path) -> None:
    m = manifest(out)
    (row,) = dicts(con, "select * from runs")
    assert row["run_id"] == m["run_id"]
    assert row["config_fingerprint"] == m["config_fingerprint"]
    for key in ("input", "kept", "rejected", "rollouts"):
        assert row[key] == m["counts"][key]
    assert row["samples_requested"] == m["config"]["sampler"]["samples"]
    assert row["created_at"].isoformat() == m["created_at"]
    assert row["duration_s"] >= 0
    assert dicts(con, "select run_id from current_run") == [{"run_id": m["run_id"]}]


def test_stage_counters_view_lists_the_manifest_counters(
    con: duckdb.DuckDBPyConnection, out: Path
) -> None:
    rows = dicts(con, "select counter, value from stage_counters")
    assert {r["counter"]: r["value"] for r in rows} == manifest(out)["stage_counters"]


def test_tasks_carry_their_run_id(con: duckdb.DuckDBPyConnection, out: Path) -> None:
    rows = dicts(con, "select distinct run_id from tasks")
    assert rows == [{"run_id": manifest(out)["run_id"]}]


@pytest.mark.parametrize("family", sorted(FAMILY_SPECS))
def test_family_view_verifier_is_that_familys_struct(
    con: duckdb.DuckDBPyConnection, family: str
) -> None:
    rows = dicts(
        con,
        f"select typeof(verifier) as t, to_json(verifier) as typed, verifier_json "
        f"from tasks_{family}",
    )
    assert rows
    for r in rows:
        assert r["t"].startswith("STRUCT(")
        assert json.loads(r["typed"]) == json.loads(r["verifier_json"])
    assert count(con, f"select count(*) from tasks_{family}") == count(
        con, f"select count(*) from tasks where family = '{family}'"
    )


@pytest.mark.parametrize("family", sorted(FAMILY_SPECS))
def test_tasks_verifier_holds_every_field_and_null_for_other_families(
    con: duckdb.DuckDBPyConnection, family: str
) -> None:
    rows = dicts(
        con,
        f"select to_json(verifier) as typed, verifier_json from tasks where family = '{family}'",
    )
    for r in rows:
        typed, spec = json.loads(r["typed"]), json.loads(r["verifier_json"])
        assert set(typed) == set(merged_fields(list(FAMILY_SPECS.values())))
        assert {k: typed[k] for k in spec} == spec
        assert all(v is None for k, v in typed.items() if k not in spec)


def test_verifier_fields_have_their_own_types(con: duckdb.DuckDBPyConnection) -> None:
    row = con.sql(
        "select typeof(verifier.timeout_s), typeof(verifier.memory_mb), "
        "typeof(verifier.asserts), typeof(verifier.files), typeof(verifier.compare.ordered) "
        "from tasks limit 1"
    ).fetchall()
    assert row == [("DOUBLE", "BIGINT", "VARCHAR[]", "MAP(VARCHAR, VARCHAR)", "BOOLEAN")]


def test_code_style_is_filterable(con: duckdb.DuckDBPyConnection, out: Path) -> None:
    want = Counter(
        json.loads(r["verifier"])["style"]
        for r in parquet_rows(out, "tasks")
        if r["family"] == "code"
    )
    rows = dicts(con, "select verifier.style as s, count(*) as n from tasks_code group by 1")
    assert {r["s"]: r["n"] for r in rows} == want


def test_rejected_raw_json_is_the_raw_record_when_it_parses(
    con: duckdb.DuckDBPyConnection, out: Path
) -> None:
    rows = dicts(con, "select raw, raw_json from rejected")
    for r in rows:
        try:
            parsed = json.loads(r["raw"])
        except json.JSONDecodeError:
            assert r["raw_json"] is None
        else:
            assert json.loads(r["raw_json"]) == parsed
    assert any(r["raw_json"] is None for r in rows)  # the parse_error line


def test_rollouts_passed_is_a_pass_verdict(con: duckdb.DuckDBPyConnection, out: Path) -> None:
    want = sum(1 for r in parquet_rows(out, "rollouts") if r["verdict"]["status"] == "pass")
    assert count(con, "select count(*) from rollouts where passed") == want


def test_family_summary_matches_the_shards(con: duckdb.DuckDBPyConnection, out: Path) -> None:
    tasks, rejected = parquet_rows(out, "tasks"), parquet_rows(out, "rejected")
    rollouts = parquet_rows(out, "rollouts")
    for r in dicts(con, "select * from family_summary"):
        fam = r["family"]
        rates = [t["pass_rate"] for t in tasks if t["family"] == fam]
        assert r["kept"] == len(rates)
        assert r["rejected"] == sum(1 for x in rejected if x["family"] == fam)
        assert r["rollouts"] == sum(1 for x in rollouts if x["family"] == fam)
        assert r["rollouts_passed"] == sum(
            1 for x in rollouts if x["family"] == fam and x["verdict"]["status"] == "pass"
        )
        if rates:
            assert r["mean_pass_rate_kept"] == pytest.approx(sum(rates) / len(rates))


# ----------------------------------------------------------------------------- macros


def python_histogram(out: Path, bins: int) -> dict[tuple[str, int], tuple[int, int]]:
    """(family, bin) -> (scored tasks, kept tasks), bins as the macro documents them."""
    scored = [(t["family"], t["pass_rate"], True) for t in parquet_rows(out, "tasks")]
    scored += [
        (r["family"], r["pass_rate"], False)
        for r in parquet_rows(out, "rejected")
        if r["pass_rate"] is not None
    ]
    hist: dict[tuple[str, int], tuple[int, int]] = {
        (fam, b): (0, 0) for fam in {s[0] for s in scored} for b in range(bins + 2)
    }
    for fam, rate, kept in scored:
        if rate <= 0:
            b = 0
        elif rate >= 1:
            b = bins + 1
        else:
            b = next(i for i in range(1, bins + 1) if rate <= i / bins)
        n, k = hist[(fam, b)]
        hist[(fam, b)] = (n + 1, k + kept)
    return hist


@pytest.mark.parametrize("bins", [1, 3, 4, 5, 10])
def test_pass_rate_histogram_matches_python(
    con: duckdb.DuckDBPyConnection, out: Path, bins: int
) -> None:
    rows = dicts(con, f"select * from pass_rate_histogram(bins := {bins})")
    got = {(r["family"], r["bin"]): (r["tasks"], r["kept"]) for r in rows}
    assert got == python_histogram(out, bins)
    for r in rows:
        if 1 <= r["bin"] <= bins:
            assert math.isclose(r["hi"] - r["lo"], 1 / bins)


def test_histogram_default_has_ten_bins(con: duckdb.DuckDBPyConnection) -> None:
    assert count(con, "select max(bin) from pass_rate_histogram()") == 11


def test_histogram_of_five_bins_sums_to_the_manifest_histogram(
    con: duckdb.DuckDBPyConnection, out: Path
) -> None:
    rows = dicts(
        con, "select label, sum(tasks) as n from pass_rate_histogram(5) group by 1 having n > 0"
    )
    assert {r["label"]: r["n"] for r in rows} == manifest(out)["pass_rate_histogram"]


def test_funnel_matches_the_rejected_shards_and_the_stage_counters(
    con: duckdb.DuckDBPyConnection, out: Path
) -> None:
    m = manifest(out)
    per_stage = Counter(r["stage"] for r in parquet_rows(out, "rejected"))
    assert set(per_stage) <= set(STAGES)
    rows = dicts(con, "select * from funnel()")
    assert [r["stage"] for r in rows] == list(STAGES)
    entered = m["counts"]["input"]
    for r in rows:
        rejected = per_stage.get(r["stage"], 0)
        assert (r["entered"], r["rejected"], r["passed"]) == (
            entered,
            rejected,
            entered - rejected,
        )
        assert r["rejected_share"] == pytest.approx(rejected / m["counts"]["input"])
        if r["stage"] in PASSED_COUNTER:
            assert r["passed"] == m["stage_counters"].get(PASSED_COUNTER[r["stage"]], 0)
        entered -= rejected
    assert entered == m["counts"]["kept"]


def test_rejection_reasons_matches_python(con: duckdb.DuckDBPyConnection, out: Path) -> None:
    m = manifest(out)
    rejected = parquet_rows(out, "rejected")
    by = Counter((r["stage"], r["reason"]) for r in rejected)
    entered: dict[str, int] = {}
    left = m["counts"]["input"]
    for stage in STAGES:
        entered[stage] = left
        left -= sum(n for (s, _), n in by.items() if s == stage)
    rows = dicts(con, "select * from rejection_reasons()")
    assert {(r["stage"], r["reason"]): r["rejected"] for r in rows} == dict(by)
    for r in rows:
        assert r["share_of_input"] == pytest.approx(r["rejected"] / m["counts"]["input"])
        assert r["share_of_stage"] == pytest.approx(r["rejected"] / entered[r["stage"]])
    assert {r["reason"]: r["rejected"] for r in rows} == m["rejected_by_reason"]


def test_rollouts_of_gives_each_tasks_rollouts_in_order(
    con: duckdb.DuckDBPyConnection, out: Path
) -> None:
    rollouts = parquet_rows(out, "rollouts")
    for task_id in {r["task_id"] for r in rollouts}:
        want = sorted(
            (r["sample_index"], r["verdict"]["status"]) for r in rollouts if r["task_id"] == task_id
        )
        got = con.execute(
            "select sample_index, verdict.status from rollouts_of(?)", [task_id]
        ).fetchall()
        assert got == want


def test_rollouts_of_an_unknown_task_is_empty(con: duckdb.DuckDBPyConnection) -> None:
    assert con.sql("select * from rollouts_of('no.such.task')").fetchall() == []


def test_checks_of_lists_every_check_of_every_sample(
    con: duckdb.DuckDBPyConnection, out: Path
) -> None:
    rollouts = [r for r in parquet_rows(out, "rollouts") if r["verdict"]["checks"]]
    task_id = rollouts[0]["task_id"]
    want = [
        (r["sample_index"], c["name"], c["passed"])
        for r in sorted(rollouts, key=lambda r: r["sample_index"])
        if r["task_id"] == task_id
        for c in r["verdict"]["checks"]
    ]
    got = con.execute(
        "select sample_index, check_name, passed from checks_of(?)", [task_id]
    ).fetchall()
    assert got == want


def test_task_fate_of_a_kept_and_of_a_rejected_record(
    con: duckdb.DuckDBPyConnection, out: Path
) -> None:
    kept = parquet_rows(out, "tasks")[0]
    rejected = next(r for r in parquet_rows(out, "rejected") if r["record_id"])
    (row,) = dicts(con, f"select * from task_fate('{kept['id']}')")
    assert (row["outcome"], row["pass_rate"]) == ("kept", kept["pass_rate"])
    assert row["source_line"] == kept["lineage"]["source_line"]
    rows = dicts(con, f"select * from task_fate('{rejected['record_id']}')")
    assert ("rejected", rejected["stage"], rejected["reason"]) in {
        (r["outcome"], r["stage"], r["reason"]) for r in rows
    }


# ----------------------------------------------------------------------------- location


def test_curate_wrote_a_catalog_without_its_staging_path(out: Path) -> None:
    data = (out / CATALOG_FILE).read_bytes()
    assert b".staging-" not in data
    assert str(out.parent).encode() not in data
    assert "catalog" in manifest(out)["outputs"]


def test_written_catalog_works_after_a_move_from_another_cwd(
    out: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    moved = tmp_path / "elsewhere" / "renamed"
    shutil.copytree(out, tmp_path / "copy")
    moved.parent.mkdir()
    os.rename(tmp_path / "copy", moved)
    monkeypatch.chdir(tmp_path)
    db = duckdb.connect(str(moved / CATALOG_FILE), read_only=True)
    db.execute(f"SET file_search_path = '{moved}'")
    for view in ("tasks", "rejected", "rollouts"):
        assert count(db, f"select count(*) from {view}") == len(parquet_rows(out, view))
    assert count(db, "select count(*) from funnel()") == len(STAGES)
    db.close()


def test_search_path_wins_over_an_output_in_the_cwd(
    out: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = tmp_path / "other"
    shutil.copytree(out, other)
    shard = next(f for f in (other / "tasks").rglob("*.parquet") if pq.read_metadata(f).num_rows)
    shard.unlink()
    assert len(parquet_rows(other, "tasks")) < len(parquet_rows(out, "tasks"))
    monkeypatch.chdir(other)  # relative paths would find the smaller copy here
    assert count(connect(out), "select count(*) from tasks") == len(parquet_rows(out, "tasks"))


@pytest.mark.skipif(duckdb_cli() is None, reason="needs the duckdb CLI (duckdb-cli)")
def test_duckdb_cli_opens_the_moved_catalog(out: Path, tmp_path: Path) -> None:
    moved = tmp_path / "moved"
    shutil.copytree(out, moved)
    cli = duckdb_cli()
    assert cli is not None
    proc = subprocess.run(
        [
            *(cli, "-readonly", "-csv", "-noheader"),
            *("-cmd", f"SET file_search_path='{moved}'"),
            *(str(moved / CATALOG_FILE), "-c", "select count(*) from rollouts"),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert int(proc.stdout.strip()) == len(parquet_rows(out, "rollouts"))


@pytest.mark.parametrize("name", ["with,comma", "quote'and space", "ünïcode"])
def test_hostile_directory_names(out: Path, tmp_path: Path, name: str) -> None:
    target = tmp_path / name / "out"
    shutil.copytree(out, target)
    write_catalog(target)
    assert count(connect(target), "select count(*) from tasks") == len(parquet_rows(out, "tasks"))


def _run_copy(out: Path, root: Path, run_id: str, drop_task_shards: bool) -> Path:
    run = root / "runs" / run_id
    shutil.copytree(out, run)
    m = manifest(run)
    m["run_id"] = run_id
    (run / "manifest.json").write_text(json.dumps(m))
    if drop_task_shards:
        shutil.rmtree(run / "tasks" / "code")
    return run


def test_root_of_runs_lists_every_run_and_shows_current(out: Path, tmp_path: Path) -> None:
    root = tmp_path / "root"
    _run_copy(out, root, "run-a", drop_task_shards=False)
    b = _run_copy(out, root, "run-b", drop_task_shards=True)
    _run_copy(out, root, ".run-c.staging", drop_task_shards=False)  # not published yet
    (root / "current").symlink_to(Path("runs") / "run-a")
    db = connect(root)
    rows = dicts(db, "select run_id from runs order by 1")
    assert rows == [{"run_id": "run-a"}, {"run_id": "run-b"}]
    assert dicts(db, "select run_id from current_run") == [{"run_id": "run-a"}]
    assert count(db, "select count(*) from tasks") == len(parquet_rows(out, "tasks"))
    (root / "current").unlink()
    (root / "current").symlink_to(Path("runs") / "run-b")  # switched while connected
    assert dicts(db, "select run_id from current_run") == [{"run_id": "run-b"}]
    assert count(db, "select count(*) from tasks") == len(parquet_rows(b, "tasks"))


@pytest.mark.parametrize("make", ["missing", "empty", "parquet only"])
def test_not_a_tasksieve_output_is_refused(tmp_path: Path, make: str) -> None:
    target = tmp_path / "x"
    if make != "missing":
        target.mkdir()
    if make == "parquet only":
        (target / "tasks").mkdir()
    with pytest.raises(NotAnOutput, match=re.escape(f"{target}: not a tasksieve output")):
        connect(target)


# ----------------------------------------------------------------------------- empty shards


def _columns(con: duckdb.DuckDBPyConnection, view: str) -> list[tuple[str, str]]:
    return [(r[0], r[1]) for r in con.sql(f"describe {view}").fetchall()]


def test_a_run_that_keeps_nothing_has_empty_views(all_rejected: Path) -> None:
    m = manifest(all_rejected)
    assert m["counts"]["kept"] == 0 and m["counts"]["rollouts"] == 0
    db = duckdb.connect(str(all_rejected / CATALOG_FILE), read_only=True)
    db.execute(f"SET file_search_path = '{all_rejected}'")
    assert count(db, "select count(*) from tasks") == 0
    assert count(db, "select count(*) from rollouts") == 0
    assert count(db, "select count(*) from rejected") == m["counts"]["input"]
    assert count(db, "select count(*) from pass_rate_histogram(4)") == 0  # no scored task
    assert dicts(db, "select passed from funnel() where stage = 'filter'") == [{"passed": 0}]


@pytest.mark.parametrize("view", ["tasks", "tasks_code", "rejected", "rollouts"])
def test_no_shard_files_gives_empty_views_with_the_same_columns(
    con: duckdb.DuckDBPyConnection, out: Path, tmp_path: Path, view: str
) -> None:
    bare = tmp_path / "bare"
    shutil.copytree(out, bare)
    for sub in ("tasks", "rejected", "rollouts"):
        shutil.rmtree(bare / sub)
    db = connect(Path(write_catalog(bare)).parent)
    assert count(db, f"select count(*) from {view}") == 0
    assert _columns(db, view) == _columns(con, view)


# ----------------------------------------------------------------------------- types


def test_a_field_with_two_types_across_families_is_refused() -> None:
    from pydantic import BaseModel

    class Other(BaseModel):
        timeout_s: str

    with pytest.raises(TypeError, match="timeout_s"):
        merged_fields([CodeSpec, Other])


def test_the_written_catalog_defines_exactly_the_listed_views_and_macros(out: Path) -> None:
    db = duckdb.connect(str(out / CATALOG_FILE), read_only=True)
    names = db.sql("select view_name from duckdb_views() where not internal").fetchall()
    views = {r[0] for r in names}
    macros = {
        r[0]
        for r in db.sql(
            "select function_name from duckdb_functions() "
            "where function_type = 'table_macro' and not internal"
        ).fetchall()
    }
    assert views == set(VIEWS)
    assert macros == set(MACROS)
