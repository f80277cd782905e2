"""The catalog's SQL for agent runs: trajectories, episodes, and how episodes ended.

``trajectories`` is one row per step (``schemas.TrajectoryStep``); ``episodes`` one row per
episode (steps, ending, verdict, reward, wall time, tokens, protocol errors, commands run);
the macros ``episode_endings()`` (the funnel of endings, with how many of each passed) and
``trajectory_of(task, episode)`` (one episode's steps in order). A run without agent
episodes has empty views with the same columns.
"""

from __future__ import annotations

AGENT_VIEWS = ("trajectories", "episodes")
AGENT_MACROS = ("episode_endings", "trajectory_of")


def agent_view_statements(source: str) -> list[str]:
    """The views, given the FROM item of the trajectory shards (files, or no rows)."""
    return [
        f"CREATE OR REPLACE VIEW trajectories AS SELECT * FROM {source}",
        """CREATE OR REPLACE VIEW episodes AS
SELECT task_id, family, episode, any_value(model_id) AS model_id,
       any_value(episode_steps) AS steps, any_value(episode_ending) AS ending,
       any_value(verdict_status) AS verdict_status, any_value(verdict_status) = 'pass' AS passed,
       any_value(reward) AS reward, any_value(tests_passed) AS tests_passed,
       any_value(tests_total) AS tests_total, any_value(episode_wall_s) AS wall_s,
       sum(duration_s) AS sandbox_s, sum(cpu_s) AS sandbox_cpu_s,
       sum(tokens_in) AS tokens_in, sum(tokens_out) AS tokens_out,
       count(*) FILTER (WHERE action_kind = 'invalid') AS protocol_errors,
       count(*) FILTER (WHERE action_kind = 'run') AS commands,
       count(*) FILTER (WHERE observation_truncated) AS truncated_observations,
       any_value(run_id) AS run_id
FROM trajectories
GROUP BY task_id, family, episode""",
    ]


AGENT_MACRO_STATEMENTS: tuple[str, ...] = (
    """CREATE OR REPLACE MACRO episode_endings() AS TABLE
SELECT ending, count(*) AS episodes, count(*) / sum(count(*)) OVER () AS share,
       count(*) FILTER (WHERE passed) AS passed, avg(steps) AS mean_steps
FROM episodes GROUP BY ending ORDER BY episodes DESC, ending""",
    """CREATE OR REPLACE MACRO trajectory_of(task, ep) AS TABLE
SELECT step, action_kind, action, exit_code, ended, duration_s, cpu_s, observation,
       observation_truncated, tokens_in, tokens_out
FROM trajectories WHERE task_id = task AND episode = ep ORDER BY step""",
)
