"""``tasksieve query OUT_DIR [SQL]``: run SQL against the catalog views of a curate output.

The views and macros are those of ``pipeline.outputs.catalog.views`` (defined afresh in memory, so
any
output works, with or without its ``catalog.duckdb``). SQL comes from the argument, from
``--file``, or from stdin when stdin is not a terminal; with none of them on a terminal, an
interactive shell opens: the duckdb CLI with the catalog loaded when it is installed, else a
small line-based shell. Output: a table (default), CSV, or JSON Lines (one object per row).
Errors (no such directory, not a tasksieve output, bad SQL, unreadable file) print one message
to stderr and exit 2. Only the standard library is imported here until the command runs.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    import duckdb

FORMATS = ("table", "csv", "json")
PROG = "tasksieve query"

_EPILOG = """\
views:  tasks (verifier as a typed struct), tasks_code / tasks_sql / tasks_api / tasks_config /
        tasks_repo,
        rejected, rollouts, runs, current_run, stage_counters, stages, family_summary,
        task_reliability (mutation score, probes agreed), surviving_mutants (one per survivor),
        trajectories (agent runs: one row per step), episodes (one row per agent episode)
macros: pass_rate_histogram(bins := 10), funnel(), rejection_reasons(), rollouts_of('ID'),
        checks_of('ID'), task_fate('ID'), episode_endings(), trajectory_of('ID', EPISODE)
examples:
  tasksieve query out "select family, count(*), avg(pass_rate) from tasks group by 1"
  tasksieve query out "from funnel()" --format csv
  tasksieve query out --file report.sql --format json
  tasksieve query out          (interactive shell)
"""


class QueryError(Exception):
    """A problem to report in one line, with exit status 2."""


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the ``query`` sub-command."""
    p = sub.add_parser(
        "query",
        help="run SQL against a curate output's DuckDB views (or open a shell)",
        description="Run SQL against the DuckDB views and macros of a curate output "
        "(a run directory, or a root holding runs/ and current).",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("out_dir", metavar="OUT_DIR", help="curate output directory")
    p.add_argument("sql", nargs="?", metavar="SQL", help="SQL to run (default: --file, stdin)")
    p.add_argument("--file", dest="sql_file", metavar="FILE", help="read the SQL from FILE")
    p.add_argument(
        "--format", choices=FORMATS, default="table", help="table (default), csv, json (lines)"
    )
    p.add_argument(
        "--max-rows",
        type=int,
        default=100,
        metavar="N",
        help="rows shown by --format table (default 100; 0: all)",
    )


def read_sql(args: argparse.Namespace, stdin: IO[str]) -> str | None:
    """The SQL to run, or None for an interactive shell."""
    if args.sql is not None and args.sql_file is not None:
        raise QueryError("give the SQL as an argument or with --file, not both")
    if args.sql_file is not None:
        try:
            return Path(args.sql_file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise QueryError(f"cannot read --file {args.sql_file}: {e}") from e
    if args.sql is not None:
        return str(args.sql)
    if stdin.isatty():
        return None
    return stdin.read()


def _where(args: argparse.Namespace) -> str:
    if args.sql_file is not None:
        return str(args.sql_file)
    return "the SQL argument" if args.sql is not None else "the SQL from stdin"


ROW = "tasksieve_row"  # the result's name inside the JSON query; to_json(ROW) is a whole row


def _rows(rel: duckdb.DuckDBPyRelation, query: str) -> list[Any]:
    """Rows of ``query`` run over ``rel`` (named ROW)."""
    result = rel.query(ROW, query)
    return [] if result is None else result.fetchall()


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def strict_json(line: str) -> str:
    """DuckDB's ``to_json`` text with NaN and infinities (not JSON) written as null."""
    if "NaN" not in line and "Infinity" not in line:
        return line
    return json.dumps(_finite(json.loads(line)), ensure_ascii=False, separators=(",", ":"))


def emit(rel: duckdb.DuckDBPyRelation, fmt: str, max_rows: int) -> None:
    """Print ``rel`` on stdout as a table (as the duckdb CLI draws it), CSV or JSON Lines."""
    out = sys.stdout
    if fmt == "json":
        for (line,) in _rows(rel, f"SELECT to_json({ROW}) FROM {ROW}"):
            out.write(strict_json(line) + "\n")
    elif fmt == "csv":
        with tempfile.TemporaryDirectory(prefix="tasksieve-query-") as tmp:
            path = os.path.join(tmp, "result.csv")
            rel.write_csv(path, header=True)
            with open(path, encoding="utf-8", newline="") as f:
                shutil.copyfileobj(f, out)
    else:
        width = shutil.get_terminal_size((120, 24)).columns
        rel.show(max_width=width, max_rows=max_rows if max_rows > 0 else 2**31 - 1)
    out.flush()


def execute(con: duckdb.DuckDBPyConnection, sql: str) -> duckdb.DuckDBPyRelation | None:
    """Run ``sql`` (one or more statements); the relation of the last one, if it has rows."""
    rel = con.sql(sql)
    return rel if rel is not None and rel.columns else None


def duckdb_cli() -> str | None:
    """The duckdb CLI: on PATH, else beside this Python (a virtualenv's bin/)."""
    found = shutil.which("duckdb")
    if found:
        return found
    beside = Path(sys.executable).parent / "duckdb"
    return str(beside) if os.access(beside, os.X_OK) else None


def init_script(out_dir: Path) -> str:
    """The SQL that loads the catalog of ``out_dir`` into a fresh duckdb CLI session."""
    from tasksieve.pipeline.outputs.catalog.sql import statements
    from tasksieve.pipeline.outputs.catalog.views import layout_of, search_path_statement

    layout = layout_of(out_dir)
    body = [search_path_statement(str(out_dir.absolute())), *statements(layout)]
    return "".join(s + ";\n" for s in body)


def run_cli(cli: str, out_dir: Path) -> int:
    """Open the duckdb CLI in memory with the catalog loaded; its exit status."""
    if "," in str(out_dir.absolute()):  # the search path is comma-separated
        raise QueryError(f"{out_dir}: the duckdb shell cannot search a path with a comma")
    with tempfile.TemporaryDirectory(prefix="tasksieve-query-") as tmp:
        script = Path(tmp) / "catalog.sql"
        script.write_text(init_script(out_dir), encoding="utf-8")
        return subprocess.call([cli, "-init", str(script)])


def repl(con: duckdb.DuckDBPyConnection, stdin: IO[str], max_rows: int) -> int:
    """A line-based shell: statements end with ';'; ``.quit`` or end of input leaves."""
    import duckdb

    out = sys.stdout
    buffer: list[str] = []
    while True:
        out.write("tasksieve> " if not buffer else "      ...> ")
        out.flush()
        line = stdin.readline()
        if not line or (not buffer and line.strip() in (".quit", ".exit")):
            out.write("\n")
            return 0
        buffer.append(line)
        if not line.rstrip().endswith(";"):
            continue
        sql, buffer = "".join(buffer), []
        try:
            rel = execute(con, sql)
            if rel is not None:
                emit(rel, "table", max_rows)
        except duckdb.Error as e:
            out.write(f"error: {e}\n")


def run(args: argparse.Namespace) -> int:
    """Run the query command; 0 on success, 2 on any error."""
    try:
        return _run(args)
    except QueryError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. piped into head
        return 0


def _run(args: argparse.Namespace) -> int:
    import duckdb

    from tasksieve.pipeline.outputs.catalog.views import CatalogError, connect, layout_of
    from tasksieve.pipeline.outputs.layout import NotAnOutput
    from tasksieve.pipeline.outputs.remote import localize

    try:
        out_dir = localize(args.out_dir)  # a remote output is read from a local copy
    except ValueError as e:
        raise QueryError(str(e)) from None
    sql = read_sql(args, sys.stdin)
    try:
        if sql is None:
            layout_of(out_dir)  # fail before the shell opens
            cli = duckdb_cli()
            if cli is not None:
                return run_cli(cli, out_dir)
            print(f"{PROG}: the duckdb CLI is not installed; a simple shell", file=sys.stderr)
            return repl(connect(out_dir), sys.stdin, args.max_rows)
        con = connect(out_dir)
    except (CatalogError, NotAnOutput) as e:
        raise QueryError(str(e)) from e
    if not sql.strip():
        raise QueryError(f"no SQL to run over {out_dir}: {_where(args)} is empty")
    try:
        rel = execute(con, sql)
        if rel is not None:
            emit(rel, args.format, args.max_rows)
    except duckdb.Error as e:
        raise QueryError(f"SQL failed in {_where(args)} (over {out_dir}): {e}") from e
    finally:
        con.close()
    return 0
