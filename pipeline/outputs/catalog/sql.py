"""The SQL of the DuckDB catalog: views over one curate output and macros for common questions.

Every path in the SQL is relative (``tasks/**/*.parquet``, ``manifest.json``): DuckDB resolves
relative paths against its ``file_search_path`` setting (else the working directory) each time a
view is used, so the caller sets ``file_search_path`` to the output directory and the same
catalog works after the directory is renamed or moved. Nothing here knows where the directory
is. A kind of shard with no file at all gets an empty view with the shard's columns, derived
from the Arrow schemas (DuckDB cannot glob zero files); that choice is made when the SQL is
generated, from what exists then.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from tasksieve.pipeline.outputs.catalog.agent_sql import (
    AGENT_MACRO_STATEMENTS,
    AGENT_MACROS,
    AGENT_VIEWS,
    agent_view_statements,
)
from tasksieve.pipeline.outputs.catalog.duck_types import (
    FAMILY_SPECS,
    arrow_columns,
    model_fields,
    quote_ident,
    type_name,
    verifier_structure,
)
from tasksieve.schemas import Manifest
from tasksieve.schemas.arrow import (
    REJECTED_SCHEMA,
    ROLLOUTS_SCHEMA,
    TASKS_SCHEMA,
    TRAJECTORIES_SCHEMA,
)
from tasksieve.transforms.reasons import STAGES

SHARDS = {
    "tasks": TASKS_SCHEMA,
    "rejected": REJECTED_SCHEMA,
    "rollouts": ROLLOUTS_SCHEMA,
    "trajectories": TRAJECTORIES_SCHEMA,
}
GLOBS = {
    "tasks": "tasks/**/*.parquet",
    "rejected": "rejected/*.parquet",
    "rollouts": "rollouts/*.parquet",
    "trajectories": "trajectories/*.parquet",
}

VIEWS = (
    "runs",
    "current_run",
    "stage_counters",
    "stages",
    "tasks",
    *(f"tasks_{f}" for f in FAMILY_SPECS),
    "rejected",
    "rollouts",
    "family_summary",
    "task_reliability",
    "surviving_mutants",
    *AGENT_VIEWS,
)
MACROS = (
    "pass_rate_histogram",
    "funnel",
    "rejection_reasons",
    "rollouts_of",
    "checks_of",
    "task_fate",
    *AGENT_MACROS,
)


@dataclass(frozen=True)
class Layout:
    """Where the data of a catalog lives, relative to the search path.

    ``run_prefix`` leads to the run the task views show ('' for a run directory,
    'current/' for a root of runs); ``manifests`` globs every run's manifest for ``runs``;
    ``present`` names the shard kinds that have at least one Parquet file.
    """

    run_prefix: str
    manifests: str
    present: frozenset[str]


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _typed_verifier(column: str, family: str | None) -> str:
    """The verifier JSON in ``column`` as a STRUCT; keys a spec lacks come out NULL."""
    shape = json.dumps(verifier_structure(family), separators=(",", ":"))
    return f"json_transform({column}, {_literal(shape)})"


def _shard_source(kind: str, layout: Layout) -> str:
    """A FROM item giving the shards of ``kind``: the files, or no rows with their columns."""
    if kind in layout.present:
        return f"read_parquet({_literal(layout.run_prefix + GLOBS[kind])})"
    cols = ", ".join(
        f"CAST(NULL AS {t}) AS {quote_ident(n)}" for n, t in arrow_columns(SHARDS[kind]).items()
    )
    return f"(SELECT {cols} LIMIT 0)"


def _manifest_source(path: str) -> str:
    fields = model_fields(Manifest).items()
    cols = ", ".join(f"{_literal(n)}: {_literal(type_name(t))}" for n, t in fields)
    return f"read_json({_literal(path)}, format = 'auto', filename = true, columns = {{{cols}}})"


def _count(key: str) -> str:
    return f"coalesce(map_extract(counts, {_literal(key)})[1], 0) AS {quote_ident(key)}"


def _runs_view(layout: Layout) -> str:
    # In a root of runs, a hidden directory under runs/ is a run still being staged.
    hidden = (
        "\nWHERE NOT starts_with(parse_filename(parse_dirpath(filename)), '.')"
        if layout.run_prefix
        else ""
    )
    counts = ", ".join(
        _count(k) for k in ("input", "kept", "rejected", "rollouts", "short_samples")
    )
    return f"""CREATE OR REPLACE VIEW runs AS
SELECT run_id,
       CAST(created_at AS TIMESTAMPTZ) AS created_at,
       CAST(finished_at AS TIMESTAMPTZ) AS finished_at,
       epoch(CAST(finished_at AS TIMESTAMPTZ)) - epoch(CAST(created_at AS TIMESTAMPTZ))
           AS duration_s,
       {counts},
       sampler, model_id,
       CAST(json_extract(config, '$.sampler.samples') AS BIGINT) AS samples_requested,
       json_extract_string(sandbox, '$.isolation') AS sandbox_isolation,
       config_fingerprint, schema_version, inputs,
       counts, rejected_by_reason, stage_counters, pass_rate_histogram,
       config, sandbox, packages, outputs,
       parse_dirpath(filename) AS path
FROM {_manifest_source(layout.manifests)}{hidden}"""


def _current_run_view(layout: Layout) -> str:
    if not layout.run_prefix:
        return "CREATE OR REPLACE VIEW current_run AS SELECT * FROM runs"
    current = _manifest_source(layout.run_prefix + "manifest.json")
    return f"""CREATE OR REPLACE VIEW current_run AS
SELECT * FROM runs WHERE run_id IN (SELECT run_id FROM {current})"""


def view_statements(layout: Layout) -> list[str]:
    """CREATE VIEW statements, in dependency order."""
    stages = ", ".join(f"({i}, {_literal(s)})" for i, s in enumerate(STAGES, 1))
    family_views = [
        f"""CREATE OR REPLACE VIEW tasks_{family} AS
SELECT * REPLACE ({_typed_verifier("verifier_json", family)} AS verifier)
FROM tasks WHERE family = {_literal(family)}"""
        for family in FAMILY_SPECS
    ]
    return [
        _runs_view(layout),
        _current_run_view(layout),
        """CREATE OR REPLACE VIEW stage_counters AS
SELECT run_id, unnest(map_keys(stage_counters)) AS counter,
       unnest(map_values(stage_counters)) AS value
FROM runs""",
        f"CREATE OR REPLACE VIEW stages AS SELECT * FROM (VALUES {stages}) AS s(step, stage)",
        f"""CREATE OR REPLACE VIEW tasks AS
SELECT * REPLACE ({_typed_verifier("verifier", None)} AS verifier),
       verifier AS verifier_json,
       lineage.run_id AS run_id
FROM {_shard_source("tasks", layout)}""",
        *family_views,
        f"""CREATE OR REPLACE VIEW rejected AS
SELECT *, CASE WHEN json_valid(raw) THEN CAST(raw AS JSON) END AS raw_json
FROM {_shard_source("rejected", layout)}""",
        f"""CREATE OR REPLACE VIEW rollouts AS
SELECT *, verdict.status = 'pass' AS passed
FROM {_shard_source("rollouts", layout)}""",
        """CREATE OR REPLACE VIEW family_summary AS
WITH fams AS (
    SELECT family FROM tasks UNION SELECT family FROM rejected
    UNION SELECT family FROM rollouts
)
SELECT f.family,
       (SELECT count(*) FROM tasks t WHERE t.family IS NOT DISTINCT FROM f.family) AS kept,
       (SELECT count(*) FROM rejected r WHERE r.family IS NOT DISTINCT FROM f.family)
           AS rejected,
       (SELECT avg(pass_rate) FROM tasks t WHERE t.family IS NOT DISTINCT FROM f.family)
           AS mean_pass_rate_kept,
       (SELECT count(*) FROM rollouts o WHERE o.family IS NOT DISTINCT FROM f.family)
           AS rollouts,
       (SELECT count(*) FILTER (WHERE passed) FROM rollouts o
        WHERE o.family IS NOT DISTINCT FROM f.family) AS rollouts_passed
FROM fams f
ORDER BY f.family NULLS LAST""",
        # test strength and ambiguity of every kept task (NULL where not measured)
        """CREATE OR REPLACE VIEW task_reliability AS
SELECT id, family, run_id,
       test_strength.score AS mutation_score,
       test_strength.made AS mutants_made,
       test_strength.killed AS mutants_killed,
       test_strength.survived AS mutants_survived,
       test_strength.equivalent AS mutants_equivalent,
       test_strength.unprobed AS mutants_unprobed,
       ambiguity.probes_tried, ambiguity.probes_valid, ambiguity.probes_agreed
FROM tasks""",
        # one row per surviving mutant of a kept task (the test gaps left above the threshold)
        """CREATE OR REPLACE VIEW surviving_mutants AS
SELECT task_id, family, run_id, s.operator, s."where", s.probe,
       s.reference_output, s.mutant_output, s.diff
FROM (SELECT id AS task_id, family, run_id, unnest(test_strength.survivors) AS s FROM tasks)""",
    ]


MACRO_STATEMENTS: tuple[str, ...] = (
    # Scored tasks (kept, and filtered ones from rejected/) per family and pass-rate bin:
    # bin 0 is exactly 0, bins 1..bins are (lo, hi], bin bins+1 is exactly 1.
    """CREATE OR REPLACE MACRO pass_rate_histogram(bins := 10) AS TABLE
WITH scored AS (
    SELECT family, pass_rate, true AS kept FROM tasks
    UNION ALL
    SELECT family, pass_rate, false AS kept FROM rejected WHERE pass_rate IS NOT NULL
), edges AS (
    SELECT 0 AS bin, 0.0 AS lo, 0.0 AS hi
    UNION ALL
    SELECT i AS bin, (i - 1) / bins AS lo, i / bins AS hi FROM range(1, bins + 1) AS r(i)
    UNION ALL
    SELECT bins + 1 AS bin, 1.0 AS lo, 1.0 AS hi
), fams AS (SELECT DISTINCT family FROM scored)
SELECT f.family, e.bin,
       CASE WHEN e.bin = 0 THEN '0' WHEN e.bin = bins + 1 THEN '1'
            ELSE '(' || round(e.lo, 4) || ',' || round(e.hi, 4) || ']' END AS label,
       e.lo, e.hi,
       count(s.pass_rate) AS tasks,
       count(s.pass_rate) FILTER (WHERE s.kept) AS kept
FROM fams f CROSS JOIN edges e
LEFT JOIN scored s
  ON s.family IS NOT DISTINCT FROM f.family
 AND CASE WHEN e.bin = 0 THEN s.pass_rate <= 0
          WHEN e.bin = bins + 1 THEN s.pass_rate >= 1
          ELSE s.pass_rate > e.lo AND s.pass_rate <= e.hi AND s.pass_rate < 1 END
GROUP BY f.family, e.bin, e.lo, e.hi
ORDER BY f.family NULLS LAST, e.bin""",
    # One row per stage in pipeline order: records that entered it, were rejected there
    # and passed it; shares are of the run's input records.
    """CREATE OR REPLACE MACRO funnel() AS TABLE
WITH total AS (SELECT any_value(input) AS input FROM current_run),
rej AS (SELECT stage, count(*) AS rejected FROM rejected GROUP BY stage),
per_stage AS (
    SELECT s.step, s.stage FROM stages s
    UNION ALL
    SELECT NULL AS step, stage FROM rej WHERE stage NOT IN (SELECT stage FROM stages)
), joined AS (
    SELECT p.step, p.stage, coalesce(r.rejected, 0) AS rejected
    FROM per_stage p LEFT JOIN rej r ON r.stage = p.stage
), cumulative AS (
    SELECT *, coalesce(sum(rejected) OVER (
        ORDER BY step NULLS LAST, stage
        ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS rejected_before
    FROM joined
)
SELECT c.step, c.stage,
       CAST(t.input - c.rejected_before AS BIGINT) AS entered,
       c.rejected,
       CAST(t.input - c.rejected_before - c.rejected AS BIGINT) AS passed,
       c.rejected / nullif(t.input, 0) AS rejected_share,
       (t.input - c.rejected_before - c.rejected) / nullif(t.input, 0) AS passed_share
FROM cumulative c CROSS JOIN total t
ORDER BY c.step NULLS LAST, c.stage""",
    # One row per (stage, reason): rejections, as a share of the input and of the records
    # that entered the stage.
    """CREATE OR REPLACE MACRO rejection_reasons() AS TABLE
SELECT f.step, r.stage, r.reason, count(*) AS rejected,
       count(*) / nullif(any_value(t.input), 0) AS share_of_input,
       count(*) / nullif(any_value(f.entered), 0) AS share_of_stage
FROM rejected r
LEFT JOIN funnel() f ON f.stage = r.stage
CROSS JOIN (SELECT any_value(input) AS input FROM current_run) t
GROUP BY f.step, r.stage, r.reason
ORDER BY f.step NULLS LAST, rejected DESC, r.reason""",
    """CREATE OR REPLACE MACRO rollouts_of(task) AS TABLE
SELECT * FROM rollouts WHERE task_id = task ORDER BY sample_index, turn""",
    """CREATE OR REPLACE MACRO checks_of(task) AS TABLE
SELECT sample_index, status, check_index, chk.name AS check_name, chk.passed AS passed,
       chk.detail AS detail
FROM (SELECT sample_index, verdict.status AS status, unnest(verdict.checks) AS chk,
             generate_subscripts(verdict.checks, 1) AS check_index
      FROM rollouts WHERE task_id = task)
ORDER BY sample_index, check_index""",
    # Where a record went: kept (with its pass rate) and/or rejected (stage, reason, detail).
    """CREATE OR REPLACE MACRO task_fate(task) AS TABLE
SELECT id, family, 'kept' AS outcome, NULL AS stage, NULL AS reason, NULL AS detail,
       lineage.source_file AS source_file, lineage.source_line AS source_line,
       n, k, pass_rate
FROM tasks WHERE id = task
UNION ALL
SELECT record_id, family, 'rejected', stage, reason, detail, source_file, source_line,
       n, k, pass_rate
FROM rejected WHERE record_id = task""",
)


def statements(layout: Layout) -> list[str]:
    """Every statement that defines the catalog, views first."""
    agent = agent_view_statements(_shard_source("trajectories", layout))
    return [*view_statements(layout), *agent, *MACRO_STATEMENTS, *AGENT_MACRO_STATEMENTS]
