"""``tasksieve query``: formats, SQL sources, the shells and the error exits, on a real run."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tasksieve.pipeline.cli import main
from tasksieve.pipeline.commands import query as query_cmd
from tasksieve.pipeline.outputs.catalog.views import connect
from tests.pipeline.catalog_runs import SMALL, curate_lines, parquet_rows
from tests.pipeline.test_cli_startup import heavy_in, loaded

SQL = "select id, family, pass_rate from tasks order by id"


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return curate_lines(tmp_path_factory.mktemp("query"), SMALL)


def query(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(["query", *argv])
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


def expected(out: Path) -> list[tuple[Any, ...]]:
    return connect(out).sql(SQL).fetchall()


class FakeStdin(io.StringIO):
    """A stdin that says whether it is a terminal."""

    def __init__(self, text: str, tty: bool) -> None:
        super().__init__(text)
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


def test_the_run_kept_tasks(out: Path) -> None:
    assert len(parquet_rows(out, "tasks")) >= 2  # the format tests below compare real rows


def test_table_format_shows_every_row(out: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, stdout, _ = query(capsys, str(out), SQL)
    assert rc == 0
    for task_id, family, _rate in expected(out):
        line = next(ln for ln in stdout.splitlines() if task_id in ln)
        assert family in line
    assert "varchar" in stdout  # column types, as the duckdb CLI draws them


def test_csv_format_parses_back_to_the_rows(out: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, stdout, _ = query(capsys, str(out), SQL, "--format", "csv")
    assert rc == 0
    rows = list(csv.reader(io.StringIO(stdout)))
    assert rows[0] == ["id", "family", "pass_rate"]
    assert [(r[0], r[1], float(r[2])) for r in rows[1:]] == expected(out)


def test_json_format_is_one_object_per_row_with_nested_values(
    out: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, stdout, _ = query(
        capsys, str(out), "select id, verifier, verifier_json from tasks_sql", "--format", "json"
    )
    assert rc == 0
    lines = [json.loads(line) for line in stdout.splitlines()]
    assert lines and len(lines) == sum(
        1 for r in parquet_rows(out, "tasks") if r["family"] == "sql"
    )
    for obj in lines:
        assert obj["verifier"] == obj["verifier_json"]  # a typed struct, printed as JSON
        assert isinstance(obj["verifier"]["compare"]["ordered"], bool)


def test_file_option_runs_the_file(
    out: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sql = tmp_path / "q.sql"
    sql.write_text(
        "-- several statements: the last one's rows are printed\n"
        "create temp table t as select 1;\n" + SQL + ";\n"
    )
    rc, stdout, _ = query(capsys, str(out), "--file", str(sql), "--format", "csv")
    assert rc == 0
    assert len(stdout.strip().splitlines()) == 1 + len(expected(out))


def test_sql_comes_from_stdin_when_it_is_not_a_terminal(
    out: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stdin", FakeStdin("select count(*) as n from rejected;", False))
    rc, stdout, _ = query(capsys, str(out), "--format", "csv")
    assert rc == 0
    assert stdout.splitlines() == ["n", str(len(parquet_rows(out, "rejected")))]


def test_a_terminal_without_the_duckdb_cli_gets_the_simple_shell(
    out: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    session = "select 6 * 7 as answer\n;\nselect nope;\n.quit\n"
    monkeypatch.setattr(sys, "stdin", FakeStdin(session, True))
    monkeypatch.setattr(query_cmd, "duckdb_cli", lambda: None)
    rc, stdout, stderr = query(capsys, str(out))
    assert rc == 0
    assert "42" in stdout
    assert "error:" in stdout and "nope" in stdout  # the shell reports and goes on
    assert "duckdb CLI is not installed" in stderr


@pytest.mark.skipif(query_cmd.duckdb_cli() is None, reason="needs the duckdb CLI (duckdb-cli)")
def test_the_duckdb_cli_loads_the_catalog_script(out: Path, tmp_path: Path) -> None:
    cli = query_cmd.duckdb_cli()
    assert cli is not None
    script = tmp_path / "init.sql"
    script.write_text(query_cmd.init_script(out))
    proc = subprocess.run(
        [cli, "-init", str(script), "-csv", "-noheader", "-c", "select count(*) from rollouts"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert int(proc.stdout.strip().splitlines()[-1]) == len(parquet_rows(out, "rollouts"))


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["{out}", "select nope from tasks"], "SQL failed in the SQL argument"),
        (["{out}", "selec 1"], "SQL failed"),
        (["{out}", "   "], "no SQL to run"),
        (["{tmp}/missing", "select 1"], "no such directory"),
        (["{tmp}", "select 1"], "not a tasksieve output"),
        (["{out}", "select 1", "--file", "{tmp}/q.sql"], "not both"),
        (["{out}", "--file", "{tmp}/absent.sql"], "cannot read --file"),
    ],
)
def test_errors_name_what_and_where_and_exit_2(
    out: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    message: str,
) -> None:
    args = [a.format(out=out, tmp=tmp_path) for a in argv]
    rc, stdout, stderr = query(capsys, *args)
    assert rc == 2
    assert stdout == ""
    assert stderr.startswith("tasksieve query: error: ") and message in stderr
    assert args[0] in stderr or "--file" in stderr


def test_bad_sql_in_a_file_names_the_file(
    out: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sql = tmp_path / "broken.sql"
    sql.write_text("select * from no_such_view")
    rc, _, stderr = query(capsys, str(out), "--file", str(sql))
    assert rc == 2 and str(sql) in stderr and "no_such_view" in stderr


def test_query_imports_no_heavy_module(out: Path, tmp_path: Path) -> None:
    rc, modules = loaded(tmp_path, "query", str(out), "select count(*) from tasks")
    assert rc == 0 and "duckdb" in modules  # it really queried
    assert heavy_in(modules) == []


def test_completion_knows_query(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["completion", "bash"]) == 0
    script = capsys.readouterr().out
    assert "query" in script and "--max-rows" in script


def test_the_console_script_exits_2_on_a_missing_dir(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tasksieve.pipeline.cli",
            "query",
            str(tmp_path / "nope"),
            "select 1",
        ],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "no such directory" in proc.stderr


def test_help_lists_every_view_and_macro() -> None:
    from tasksieve.pipeline.outputs.catalog.sql import MACROS, VIEWS

    missing = [name for name in (*VIEWS, *MACROS) if name not in query_cmd._EPILOG]
    assert missing == []


@pytest.mark.parametrize(
    "value", ["'nan'::DOUBLE", "'inf'::DOUBLE", "'-inf'::DOUBLE", "[1.0, 'nan'::DOUBLE]"]
)
def test_json_format_writes_non_finite_numbers_as_null(value: str) -> None:
    from tasksieve.pipeline.commands.query import strict_json

    sql = f"SELECT to_json(t) FROM (SELECT {value} AS x, 'NaN text' AS s) t"
    ((line,),) = duckdb.connect().execute(sql).fetchall()
    parsed = json.loads(strict_json(line), parse_constant=lambda c: pytest.fail(c))
    assert parsed["s"] == "NaN text"
    assert parsed["x"] in (None, [1.0, None])
