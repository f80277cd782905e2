"""Multi-turn episodes: execute, feed the verdict back, let the model correct itself.

A task gets K episodes (the K samples of a one-turn run). Turn 1 is the first attempt; after
a failed attempt the verdict becomes feedback (``verifiers.feedback``, at the task's level),
appended to the conversation with the attempt itself, and the model tries again, up to
``turns`` attempts or a pass. Every attempt is a rollout row (``turn``, the ``feedback`` that
preceded it, ``sample_index`` = the episode's index).

Scoring: ``k_by_turn[t-1]`` is the number of episodes passed by turn t (cumulative), so the
pass rate per turn never decreases; the band, k and pass_rate use ``band_turn`` (default the
last turn). An episode whose verification hit ``infra_error`` (after retries) ends there and
is left out of n for every turn, as a one-turn run leaves such a sample out; the band must
then be settled without it (``transforms.algorithms.settle``). A later turn for which the sampler
returned nothing rejects the task as ``rollouts.turn_missing``: a pass rate from the episodes
that happened to continue would be biased.

This module holds the state and the plain functions; ``transforms.rollouts.multi_turn`` the Beam
wiring. What it does NOT do: carry anything between episodes (each is its own conversation),
or stop an episode early for any reason but a pass, an infra error or the last turn.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tasksieve.schemas import FeedbackLevel, Verdict
from tasksieve.transforms.algorithms.settle import band_settled
from tasksieve.transforms.algorithms.stats import BandConfig
from tasksieve.transforms.rollouts.rollout_round import sample_request
from tasksieve.transforms.runtime.items import Item, Scored
from tasksieve.transforms.samplers import SampleRequest
from tasksieve.verifiers.feedback import LEVELS, feedback_message


@dataclass(frozen=True)
class EpisodeConfig:
    """How many turns an episode has, which turn the band uses, the run's feedback level."""

    turns: int = 1
    band_turn: int | None = None
    """The turn whose pass rate decides the band (None: the last turn)."""
    feedback: FeedbackLevel | None = None
    """Overrides every task's own ``feedback`` field when set (None: the task's, else summary)."""

    def __post_init__(self) -> None:
        if isinstance(self.turns, bool) or not isinstance(self.turns, int) or self.turns < 1:
            raise ValueError(f"turns must be an integer >= 1 (--turns), got {self.turns!r}")
        if self.band_turn is not None and not 1 <= self.band_turn <= self.turns:
            raise ValueError(
                f"band_turn must be in 1..turns ({self.turns}), got {self.band_turn} "
                "(--band-turn; leave it unset for the last turn)"
            )
        if self.feedback is not None and self.feedback not in LEVELS:
            raise ValueError(
                f"feedback must be one of {', '.join(LEVELS)} (--feedback), got {self.feedback!r}"
            )

    def check_not_adaptive(self, adaptive: bool) -> None:
        """Refuse ``turns`` > 1 together with adaptive sampling (rounds of first attempts do not
        compose with episodes yet: which round would a later turn belong to?)."""
        if adaptive and self.turns > 1:
            raise ValueError(
                f"--turns {self.turns} cannot be combined with --adaptive: adaptive sampling "
                "stops tasks after rounds of one-shot samples; use --turns 1 with --adaptive, "
                "or drop --adaptive for multi-turn episodes"
            )

    @property
    def scored_turn(self) -> int:
        """The turn the band uses."""
        return self.band_turn or self.turns


@dataclass
class Episode:
    """One conversation: its attempts so far and how it ended."""

    index: int
    history: list[tuple[str, str]] = field(default_factory=list)
    """The conversation after the task's prompt: (role, content) pairs."""
    passed_at: int | None = None
    lost: bool = False  # an attempt hit infra_error: left out of n
    solution: str = ""  # the passing solution, once passed

    @property
    def open(self) -> bool:
        return self.passed_at is None and not self.lost


@dataclass
class EpisodeState:
    """A task's K episodes between turns."""

    item: Item
    level: str
    model_id: str
    requested: int
    episodes: list[Episode]
    turn: int = 0  # the last turn done

    def open(self) -> list[Episode]:
        """The episodes still trying."""
        return [e for e in self.episodes if e.open]


def turn_requests(state: EpisodeState, turn: int) -> list[tuple[tuple[str, int], SampleRequest]]:
    """One request per open episode for ``turn``, keyed by (task id, episode index)."""
    base = sample_request(state.item)
    return [
        (
            (state.item.id, e.index),
            SampleRequest(
                base.task_id,
                base.family,
                base.prompt,
                base.entry_point,
                history=tuple(e.history),
                turn=turn,
                episode=e.index,
            ),
        )
        for e in state.open()
    ]


def record_attempt(
    state: EpisodeState,
    episode: Episode,
    turn: int,
    turns: int,
    completion: str,
    solution: str,
    verdict: Verdict,
) -> None:
    """Update ``episode`` with its attempt at ``turn``; add feedback when it goes on."""
    if verdict.passed:
        episode.passed_at, episode.solution = turn, solution
    elif verdict.status == "infra_error":
        episode.lost = True
    elif turn < turns:
        message = feedback_message(verdict, state.item.task.family, state.level)
        episode.history += [("assistant", completion), ("user", message)]


def previous_feedback(episode: Episode) -> str | None:
    """The feedback that preceded the episode's next attempt (None before turn 2)."""
    return episode.history[-1][1] if episode.history else None


def k_by_turn(state: EpisodeState, turns: int) -> list[int]:
    """Episodes (not lost) passed by turn 1..``turns``."""
    kept = [e for e in state.episodes if not e.lost]
    return [
        sum(e.passed_at is not None and e.passed_at <= t for e in kept) for t in range(1, turns + 1)
    ]


def score(
    state: EpisodeState, cfg: EpisodeConfig, band: BandConfig
) -> tuple[Scored | None, str, int]:
    """The task's Scored at the band turn, or None when infra errors leave the band unsettled;
    with the reason line and the number of episodes lost."""
    passes = k_by_turn(state, cfg.turns)
    lost = sum(e.lost for e in state.episodes)
    n = len(state.episodes) - lost
    turn = cfg.scored_turn
    k = passes[turn - 1]
    settled, why = band_settled(k, n, lost, band)
    if not settled:
        return None, why, lost
    passing = [
        (e.index, e.solution)
        for e in state.episodes
        if not e.lost and e.passed_at is not None and e.passed_at <= turn
    ]
    scored = Scored(state.item, n, k, state.model_id, state.requested, passing, k_by_turn=passes)
    return scored, why, lost
