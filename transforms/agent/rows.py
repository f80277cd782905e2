"""What an episode leaves in the output: its trajectory rows and its one rollout row.

``trajectory_rows`` gives one ``TrajectoryStep`` per step (the episode's ending, verdict and
reward on each). ``rollout_columns`` gives the episode's ``Rollout`` row: ``sample_index`` is
the episode, ``completion`` the last reply, ``solution`` the final workspace's diff, and the
verdict and reward the same as on its trajectory rows; so the one-shot views (pass rates,
rollouts of a task) read agent runs unchanged.
"""

from __future__ import annotations

from typing import Any

from tasksieve.schemas import Rollout, TrajectoryStep, Verdict
from tasksieve.transforms.agent.episode import Episode
from tasksieve.verifiers.rewards import Reward, reward

DETAIL_CHARS = 2000


def verdict_of(e: Episode) -> Verdict:
    """The episode's verdict (an ended episode always has one)."""
    return e.verdict or Verdict(status="infra_error", detail="the episode did not end")


def episode_reward(e: Episode, reference_s: float | None = None) -> float | None:
    """The episode's reward from its verdict and the task's reward spec (None: infra_error)."""
    earned = reward(verdict_of(e), e.task.reward, reference_s)
    return earned.value if isinstance(earned, Reward) else None


def trajectory_rows(
    e: Episode, run_id: str, model_id: str, reference_s: float | None = None
) -> list[dict[str, Any]]:
    """One ``TrajectoryStep`` row (as a dict) per step of ``e``."""
    v, value = verdict_of(e), episode_reward(e, reference_s)
    common = {
        "task_id": e.task.id,
        "family": e.task.family,
        "episode": e.index,
        "episode_steps": len(e.steps),
        "episode_ending": e.ending or "unknown",
        "episode_wall_s": round(e.wall_s, 4),
        "verdict_status": v.status,
        "verdict_detail": v.detail[:DETAIL_CHARS],
        "tests_passed": v.tests_passed,
        "tests_total": v.tests_total,
        "reward": value,
        "model_id": model_id,
        "run_id": run_id,
    }
    return [
        TrajectoryStep(
            step=s.step,
            action_kind=s.action.kind,
            action=s.action.describe(),
            reply=s.reply,
            observation=s.observation,
            observation_truncated=s.truncated,
            exit_code=s.exit_code,
            ended=s.ended,
            duration_s=s.duration_s,
            cpu_s=s.cpu_s,
            tokens_in=s.tokens_in,
            tokens_out=s.tokens_out,
            **common,
        ).model_dump()
        for s in e.steps
    ]


def rollout_row(
    e: Episode, run_id: str, model_id: str, sampler: str, reference_s: float | None = None
) -> dict[str, Any]:
    """The episode's one ``Rollout`` row (see the module docstring)."""
    v = verdict_of(e)
    earned = reward(v, e.task.reward, reference_s)
    tokens_in = [s.tokens_in for s in e.steps if s.tokens_in is not None]
    tokens_out = [s.tokens_out for s in e.steps if s.tokens_out is not None]
    return Rollout(
        task_id=e.task.id,
        family=e.task.family,
        sample_index=e.index,
        model_id=model_id,
        sampler=sampler,
        completion=e.steps[-1].reply if e.steps else "",
        solution=e.diff,
        verdict=v,
        run_id=run_id,
        reward=earned.value if isinstance(earned, Reward) else None,
        reward_components=earned.components if isinstance(earned, Reward) else None,
        turn=len(e.steps) or 1,
        finish_reason=e.ending,
        prompt_tokens=sum(tokens_in) if tokens_in else None,
        completion_tokens=sum(tokens_out) if tokens_out else None,
        latency_s=round(e.wall_s, 4),
    ).model_dump()
