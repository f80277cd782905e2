"""Open a curate output in DuckDB with ready views and macros; write them to ``catalog.duckdb``.

``connect(OUT_DIR)`` defines, in a DuckDB connection, the views ``tasks`` (the verifier spec as
a typed STRUCT; ``tasks_code`` .. ``tasks_repo`` with each family's own STRUCT), ``rejected``,
``rollouts``, ``runs``, ``current_run``, ``stage_counters``, ``stages``, ``family_summary`` and
the table macros ``pass_rate_histogram(bins)``, ``funnel()``, ``rejection_reasons()``,
``rollouts_of(id)``, ``checks_of(id)``, ``task_fate(id)`` (SQL in ``pipeline.outputs.catalog.sql``).
``write_catalog(OUT_DIR)`` stores the same in ``OUT_DIR/catalog.duckdb``.

OUT_DIR is either one run (holding ``manifest.json``) or a root of runs (``runs/<id>/`` and a
``current`` link to the live one; ``tasksieve.pipeline.outputs.layout`` tells which, and raises
its ``NotAnOutput`` for anything else): then ``runs`` lists every run and the other views show
``current``.

Location: the views hold relative paths, and DuckDB resolves those against its
``file_search_path`` setting (else the process's working directory). ``connect`` sets that
setting to OUT_DIR, so a catalog written in a staging directory keeps working after the
directory is renamed or moved, from any working directory. A DuckDB client that opens
``catalog.duckdb`` itself must do the same (``SET file_search_path = 'OUT_DIR'``, or start in
OUT_DIR): DuckDB has no paths relative to the database file. The setting is a comma-separated
list, so a directory whose path holds a comma is reached through a symbolic link in a
temporary directory. What this does NOT do: keep a written catalog's empty-view choice in step
with later changes (a kind of shard with no file when the catalog was written stays empty), or
check the shards against the manifest.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from tasksieve.pipeline.outputs.catalog.sql import GLOBS, Layout, statements
from tasksieve.pipeline.outputs.layout import RunLayout

if TYPE_CHECKING:
    import duckdb

CATALOG_FILE = "catalog.duckdb"
# Storage format of the written file: readable by every DuckDB from 1.0 on, so a duckdb CLI
# older than the Python package that wrote the catalog still opens it.
STORAGE_VERSION = "v1.0.0"


class CatalogError(Exception):
    """The catalog of a tasksieve output cannot be defined."""


def layout_of(out_dir: Path) -> Layout:
    """Where the catalog of ``out_dir`` finds its data (``NotAnOutput`` if it is no output)."""
    run = RunLayout.find(out_dir)
    present = frozenset(k for k, pattern in GLOBS.items() if any(run.run_dir.glob(pattern)))
    return Layout(run_prefix=run.run_prefix, manifests=run.manifests_glob, present=present)


def _search_dir(out_dir: Path) -> tuple[str, Callable[[], None] | None]:
    """A path DuckDB's search path can hold for ``out_dir``, and how to release it."""
    path = str(out_dir.absolute())
    if "," not in path:
        return path, None
    holder = tempfile.mkdtemp(prefix="tasksieve-catalog-")
    link = os.path.join(holder, "out")
    os.symlink(path, link)
    return link, lambda: shutil.rmtree(holder, ignore_errors=True)


def _release_with(con: duckdb.DuckDBPyConnection, release: Callable[[], None]) -> None:
    """Call ``release`` once ``con`` is gone (at exit where it cannot be weakly referenced)."""
    try:
        weakref.finalize(con, release)
    except TypeError:
        atexit.register(release)


def _sql_literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def search_path_statement(directory: str) -> str:
    """The statement that makes relative paths resolve in ``directory`` (every cursor too)."""
    return f"SET GLOBAL file_search_path = {_sql_literal(directory)}"


def _open(database: str) -> duckdb.DuckDBPyConnection:
    import duckdb

    if database == ":memory:" or Path(database).exists():
        return duckdb.connect(database)
    try:
        return duckdb.connect(database, config={"storage_compatibility_version": STORAGE_VERSION})
    except duckdb.Error:  # a DuckDB without the setting writes its own format
        return duckdb.connect(database)


def define(con: duckdb.DuckDBPyConnection, out_dir: Path, layout: Layout) -> None:
    """Create the views and macros in ``con`` (whose search path is already ``out_dir``)."""
    import duckdb

    for statement in statements(layout):
        try:
            con.execute(statement)
        except duckdb.Error as e:
            name = statement.split(" AS", 1)[0].removeprefix("CREATE OR REPLACE ")
            raise CatalogError(f"{out_dir}: cannot define {name}: {e}") from e


def connect(out_dir: Path, database: str = ":memory:") -> duckdb.DuckDBPyConnection:
    """A DuckDB connection with the catalog's views and macros over ``out_dir``.

    ``database`` is where the definitions go (default: in memory); the connection's search
    path is ``out_dir``, for every cursor of it. Raises ``NotAnOutput`` when ``out_dir`` is
    not a tasksieve output, ``CatalogError`` when a view cannot be defined.
    """
    out_dir = Path(out_dir)
    layout = layout_of(out_dir)
    directory, release = _search_dir(out_dir)
    con = _open(database)
    try:
        con.execute(search_path_statement(directory))
        define(con, out_dir, layout)
    except BaseException:
        con.close()
        if release is not None:
            release()
        raise
    if release is not None:
        _release_with(con, release)
    return con


def write_catalog(out_dir: Path) -> Path:
    """Write ``out_dir/catalog.duckdb`` holding the catalog's views and macros; return it.

    The file is built beside its final name and renamed into place, so a reader never sees
    half a catalog; an earlier catalog is replaced.
    """
    out_dir = Path(out_dir)
    target = out_dir / CATALOG_FILE
    tmp = out_dir / f".{CATALOG_FILE}.tmp-{os.getpid()}"
    for leftover in (tmp, tmp.with_name(tmp.name + ".wal")):
        leftover.unlink(missing_ok=True)
    con = connect(out_dir, str(tmp))
    try:
        con.execute("CHECKPOINT")
    finally:
        con.close()
    os.replace(tmp, target)
    return target
