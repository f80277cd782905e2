"""Many episodes at once: one policy call per step for every open episode, steps in parallel.

``run_episodes`` opens a session per episode, then repeats: ask the policy for the next reply
of every open episode in one call (the model batches them, as the one-shot path batches
tasks), run those actions on a thread pool of ``AgentConfig.concurrency`` (the bound on
sandbox steps in flight per worker), and drop the episodes that ended; each ends, is judged
and releases its session inside its own step, so a finished episode holds nothing while the
others go on. Sessions are opened on the same pool.

What it does NOT do: let a fast episode run ahead of a slow one (every open episode takes its
step in the same round; the round lasts as long as its slowest step), or open sessions lazily
(all episodes of the call hold a session from the start; bound them with the batch size).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from tasksieve.schemas import TaskRecord, Verdict
from tasksieve.transforms.agent.config import AgentConfig
from tasksieve.transforms.agent.episode import Episode
from tasksieve.transforms.agent.policies import Policy, Reply
from tasksieve.transforms.agent.session import Opener, WorkspaceVerifier

log = logging.getLogger("tasksieve.agent")


def _guarded_apply(episode: Episode, reply: Reply, verifier: WorkspaceVerifier) -> None:
    try:
        episode.apply(reply, verifier)
    except Exception as exc:  # a bug or a broken backend ends this episode, not the batch
        log.exception("episode %s/%d failed", episode.task.id, episode.index)
        if not episode.done:
            episode._end(
                "no_session", Verdict(status="infra_error", detail=f"{type(exc).__name__}: {exc}")
            )


def _guarded_start(episode: Episode, opener: Opener) -> None:
    try:
        episode.start(opener)
    except Exception as exc:
        log.exception("episode %s/%d could not start", episode.task.id, episode.index)
        episode._end(
            "no_session", Verdict(status="infra_error", detail=f"{type(exc).__name__}: {exc}")
        )


def run_episodes(
    jobs: Sequence[tuple[TaskRecord, int]],
    policy: Policy,
    opener: Opener,
    verifier: WorkspaceVerifier,
    cfg: AgentConfig,
    pool: ThreadPoolExecutor | None = None,
) -> list[Episode]:
    """Run one episode per ``(task, episode index)`` to its end; returns them in job order."""
    episodes = [Episode(task, index, cfg, tools=policy.tools) for task, index in jobs]
    own = pool is None
    pool = pool or ThreadPoolExecutor(max_workers=cfg.concurrency, thread_name_prefix="agent")
    try:
        list(pool.map(_guarded_start, episodes, [opener] * len(episodes)))
        active = [e for e in episodes if not e.done]
        while active:
            replies = policy.act([e.turn() for e in active])
            if len(replies) != len(active):  # a policy bug: fail these episodes, never hang
                why = f"policy returned {len(replies)} replies for {len(active)} turns"
                replies = [Reply(error=why)] * len(active)
            list(pool.map(_guarded_apply, active, replies, [verifier] * len(active)))
            active = [e for e in active if not e.done]
    finally:
        for e in episodes:  # nothing outlives the call, whatever happened
            if e.ws is not None:
                e.ws.close()
                e.ws = None
        if own:
            pool.shutdown(wait=True)
    return episodes
