"""DuckDB views over an eval output; written to ``catalog.duckdb`` like curate's catalog.

Views: ``scores`` (one row per scored task), ``rollouts``, ``rejected``, ``meta`` (every task
that entered), ``trajectories`` (agent runs: one row per step), ``manifest`` (the run's
manifest as one row), ``family_pass`` (per family: tasks, samples, mean pass@1 and the mean
reward), ``failures`` (the failure kinds per family, long form). The paths are relative,
resolved against DuckDB's ``file_search_path`` (``connect`` sets it to the output directory,
as ``pipeline.outputs.catalog.views`` does for curate; a client opening ``catalog.duckdb``
itself sets it, or starts in the directory). What this does NOT do: cover an eval kind with no
shard (a run whose every task was rejected has an empty ``scores`` view but no ``rollouts``
file: that view is then left out)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from tasksieve.pipeline.eval.scores import FAILURE_KINDS
from tasksieve.pipeline.outputs.catalog.views import STORAGE_VERSION, search_path_statement

if TYPE_CHECKING:
    import duckdb

CATALOG_FILE = "catalog.duckdb"
SHARDS = ("scores", "rollouts", "rejected", "meta", "trajectories")


def statements(out_dir: Path) -> list[str]:
    """The view definitions for the eval output at ``out_dir``."""
    out = [
        f"CREATE OR REPLACE VIEW {kind} AS SELECT * FROM read_parquet('{kind}/**/*.parquet')"
        for kind in SHARDS
        if any((out_dir / kind).rglob("*.parquet"))
    ]
    out.append("CREATE OR REPLACE VIEW manifest AS SELECT * FROM read_json_auto('manifest.json')")
    if any((out_dir / "scores").rglob("*.parquet")):
        out.append(
            "CREATE OR REPLACE VIEW family_pass AS SELECT family, count(*) AS tasks, "
            "sum(n) AS samples, avg(c / n) AS pass_at_1, avg(reward) AS reward "
            "FROM scores WHERE n > 0 GROUP BY family ORDER BY family"
        )
        cols = ", ".join(f'fail_{k} AS "{k}"' for k in FAILURE_KINDS)
        names = ", ".join(f'"{k}"' for k in FAILURE_KINDS)
        out.append(
            "CREATE OR REPLACE VIEW failures AS SELECT family, kind, sum(count) AS count FROM "
            f"(UNPIVOT (SELECT family, {cols} FROM scores) ON {names} INTO NAME kind VALUE count) "
            "GROUP BY family, kind ORDER BY family, kind"
        )
    return out


def connect(out_dir: Path, database: str = ":memory:") -> duckdb.DuckDBPyConnection:
    """A DuckDB connection with the eval views over ``out_dir`` (its search path)."""
    import duckdb

    out_dir = Path(out_dir)
    if database != ":memory:" and not Path(database).exists():
        con = duckdb.connect(database, config={"storage_compatibility_version": STORAGE_VERSION})
    else:
        con = duckdb.connect(database)
    try:
        con.execute(search_path_statement(str(out_dir.absolute())))
        for statement in statements(out_dir):
            con.execute(statement)
    except BaseException:
        con.close()
        raise
    return con


def write_catalog(out_dir: Path) -> Path:
    """Write ``out_dir/catalog.duckdb`` with the eval views (built aside, renamed into place)."""
    target = out_dir / CATALOG_FILE
    tmp = out_dir / f".{CATALOG_FILE}.tmp-{os.getpid()}"
    tmp.unlink(missing_ok=True)
    con = connect(out_dir, str(tmp))
    try:
        con.execute("CHECKPOINT")
    finally:
        con.close()
    os.replace(tmp, target)
    return target
