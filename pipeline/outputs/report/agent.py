"""The report's section for agent runs: how episodes ended, and one trajectory per kept task.

Read from the ``trajectories/`` shards (``schemas.TrajectoryStep``); a run without them gets
no section. The trajectory shown for a kept task is its first passing episode, else its first
episode; each step shows the action and the start of what the agent saw.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

import pyarrow.parquet as pq

from tasksieve.pipeline.outputs.layout import RunLayout
from tasksieve.pipeline.outputs.report.html import e, table

MAX_TASKS = 20
ACTION_CHARS = 300
OBSERVATION_CHARS = 400
COLUMNS = ["task_id", "episode", "step", "action_kind", "action", "exit_code", "observation",
           "episode_ending", "verdict_status", "reward"]  # fmt: skip


def _cut(text: Any, limit: int) -> str:
    s = "" if text is None else str(text)
    return s if len(s) <= limit else s[:limit] + " ..."


def agent_section(run: RunLayout) -> str:
    """The section's HTML ('' when the run has no trajectories)."""
    files = run.shards("trajectories")
    rows = [r for f in files for r in pq.read_table(f, columns=COLUMNS).to_pylist()]
    if not rows:
        return ""
    episodes: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        episodes[(r["task_id"], r["episode"])].append(r)
    endings = Counter(steps[0]["episode_ending"] for steps in episodes.values())
    passed = Counter(
        steps[0]["episode_ending"]
        for steps in episodes.values()
        if steps[0]["verdict_status"] == "pass"
    )
    funnel = table(
        "episode-endings",
        ["ending", "episodes", "passed", "mean steps"],
        [
            (
                ending,
                n,
                passed[ending],
                round(
                    sum(len(s) for s in episodes.values() if s[0]["episode_ending"] == ending) / n,
                    1,
                ),
            )
            for ending, n in endings.most_common()
        ],
    )
    kept = _kept_ids(run)
    shown = []
    for task_id in sorted(kept)[:MAX_TASKS]:
        mine = sorted((k[1], v) for k, v in episodes.items() if k[0] == task_id)
        if not mine:
            continue
        index, steps = next(((i, s) for i, s in mine if s[0]["verdict_status"] == "pass"), mine[0])
        steps = sorted(steps, key=lambda r: r["step"])
        body = table(
            f"trajectory-{task_id}-{index}",
            ["step", "action", "exit", "observation"],
            [
                (
                    r["step"],
                    _cut(r["action"], ACTION_CHARS),
                    r["exit_code"],
                    _cut(r["observation"], OBSERVATION_CHARS),
                )
                for r in steps
            ],
            numeric=range(0, 1),
        )
        head = (
            f"{e(task_id)}, episode {index}: {e(steps[0]['episode_ending'])}, "
            f"{e(steps[0]['verdict_status'])}, reward {e(steps[0]['reward'])}"
        )
        shown.append(f"<details><summary>{head}</summary>{body}</details>")
    more = (
        f"<p>{len(kept) - MAX_TASKS} more kept tasks not shown.</p>"
        if len(kept) > MAX_TASKS
        else ""
    )
    return (
        '<section id="agent"><h2>Agent episodes</h2>'
        f"<p>{len(episodes)} episodes, {len(rows)} steps. How they ended:</p>{funnel}"
        "<h3>One trajectory per kept task</h3>" + "".join(shown) + more + "</section>"
    )


def _kept_ids(run: RunLayout) -> set[str]:
    return {
        i
        for f in run.shards("tasks")
        for i in pq.read_table(f, columns=["id"]).column("id").to_pylist()
    }
