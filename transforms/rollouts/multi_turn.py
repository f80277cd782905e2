"""Beam wiring of multi-turn episodes (``transforms.rollouts.episode_state``): the T turns unrolled.

Turn 1 is the one-turn ``Rollouts`` stage (K completions per task). Each later turn t sends
one request per still-open episode through ``RunInference`` (so the sampler batches across
tasks every turn), joins the answers back to their task, verifies them and builds the
feedback for the failures. A task leaves the loop when no episode is open or after turn T;
``ScoreEpisodes`` then scores it at the band turn. Main output: ``Scored``; plus ``rollouts``
(one row per attempt) and ``rejected``.

Every later turn is a ``transforms.rollouts.rollout_round.RolloutRound`` (turn 1's
``Rollouts`` is one too): a sampler that raises on an episode rejects its task as
``rollouts.sampler_error``, and with a cache directory the completions of every turn (keyed on
the conversation so far) and their verdicts are cached. A step that raises on a task rejects
it as ``rollouts.error`` or ``verify.error`` (``tasksieve.transforms.runtime.deadletter``).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import apache_beam as beam
from apache_beam.typehints.decorators import no_annotations

from tasksieve.schemas import FeedbackLevel, Verdict
from tasksieve.transforms.algorithms.stats import BandConfig
from tasksieve.transforms.reliability.gates import count_retry
from tasksieve.transforms.rollouts.episode_state import (
    Episode,
    EpisodeConfig,
    EpisodeState,
    previous_feedback,
    record_attempt,
    score,
    turn_requests,
)
from tasksieve.transforms.rollouts.rollout_round import RolloutRound, sample_request
from tasksieve.transforms.rollouts.rounds import ROLLOUTS, Rollouts, VerifySamplesFn, rollout_row
from tasksieve.transforms.runtime.common import REJECTED, count, rejected
from tasksieve.transforms.runtime.deadletter import Guarded, merge_rejected
from tasksieve.transforms.runtime.items import Item, rejection
from tasksieve.transforms.samplers import SamplerConfig, Samples, extract_solution
from tasksieve.verifiers import SandboxConfig
from tasksieve.verifiers.feedback import resolve_level
from tasksieve.verifiers.retry import RetryPolicy

log = logging.getLogger("tasksieve.episodes")
DONE = "done"

Answers = dict[int, Samples]
"""A turn's completions by episode index (each a Samples of one completion)."""
UNSPLIT = -1
"""The answer index of a task's error Samples when a failed batch could not be split by
episode (any error answer rejects the task)."""


def turn_sampler(cfg: SamplerConfig) -> SamplerConfig:
    """The sampler config of turns >= 2: one completion per request, as many rows per batch."""
    return dataclasses.replace(cfg, samples=1, batch_size=cfg.batch_size * cfg.samples)


@dataclass(frozen=True)
class Failed:
    """A task whose first turn the sampler failed (rejected by the turn-1 verify stage)."""

    reason: str
    detail: str
    item: Item
    requested: int


def first_turn(pair: tuple[Item, Samples], run_feedback: FeedbackLevel | None) -> Any:
    """(state, answers) for turn 1 from the one-turn pair, or ``Failed``."""
    item, samples = pair
    if samples.error is not None:
        return Failed("rollouts.sampler_error", samples.error, item, samples.requested)
    if not samples.completions:
        detail = f"sampler {samples.sampler} returned no completion of {samples.requested} asked"
        return Failed("rollouts.no_samples", detail, item, samples.requested)
    level = resolve_level(item.task.feedback, run_feedback)
    episodes = [Episode(j) for j in range(len(samples.completions))]
    state = EpisodeState(item, level, samples.model_id, samples.requested, episodes)
    answers = {
        j: Samples(item.id, [c], samples.model_id, samples.sampler, 1, meta=samples.meta[j : j + 1])
        for j, c in enumerate(samples.completions)
    }
    return state, answers


class TurnFn(VerifySamplesFn):
    """Verify one turn of every open episode of a task; emit its rows; open or done."""

    def __init__(
        self,
        sandbox: SandboxConfig,
        run_id: str,
        episodes: EpisodeConfig,
        turn: int,
        retry: RetryPolicy | None = None,
        cache_dir: str | None = None,
    ) -> None:
        super().__init__(sandbox, run_id, None, retry, cache_dir)
        self.episodes_cfg = episodes
        self.turn = turn

    def _reject(
        self, reason: str, detail: str, item: Item, requested: int, stage: str = "rollouts"
    ) -> Any:
        return rejected(
            rejection(
                stage=stage,
                reason=reason,
                detail=detail,
                run_id=self.run_id,
                item=item,
                n=0,
                n_requested=requested,
            )
        )

    def process(self, element: Any) -> Iterator[Any]:
        self.count_sandbox()  # what this worker's runs really got
        if isinstance(element, Failed):  # turn 1's sampler failed the task
            yield self._reject(element.reason, element.detail, element.item, element.requested)
            return
        state, answers = element
        # a copy: the input element may be shared with other consumers of the PCollection
        state = dataclasses.replace(
            state,
            episodes=[dataclasses.replace(e, history=list(e.history)) for e in state.episodes],
        )
        item, turn = state.item, self.turn
        open_eps = state.open()
        failed = [a.error for a in answers.values() if a.error is not None]
        if failed:  # the sampler failed one of its episodes
            yield self._reject("rollouts.sampler_error", failed[0], item, state.requested)
            return
        for e in open_eps:
            got = answers.get(e.index)
            if got is None or not got.completions:
                detail = (
                    f"the sampler returned no completion for turn {turn} of episode {e.index} "
                    f"(failed at turn {turn - 1}); a replay file needs a row with "
                    f'"turn": {turn} for it'
                )
                yield self._reject("rollouts.turn_missing", detail, item, state.requested)
                return
        # gates reject these first; kept for safety
        verifier = self.verifier_for(item, "verify", n=0, n_requested=state.requested)
        if isinstance(verifier, dict):
            yield rejected(verifier)
            return
        if item.reference_s:
            verifier.calibrate(item.task, item.reference_s)
        entry = sample_request(item).entry_point
        comps = [answers[e.index].completions[0] for e in open_eps]
        sols = [extract_solution(c, item.task.family, entry) for c in comps]
        tries = self.verify_solutions(item.task, verifier, sols)
        count(f"episodes.turn{turn}.attempts", len(open_eps))
        for e, comp, sol, t in zip(open_eps, comps, sols, tries, strict=True):
            count_retry("verify", t)
            yield beam.pvalue.TaggedOutput(
                ROLLOUTS, self._row(state, e, answers[e.index], comp, sol, t.verdict)
            )
            record_attempt(state, e, turn, self.episodes_cfg.turns, comp, sol, t.verdict)
            if e.passed_at == turn and turn > 1:
                count("episodes.recovered")
        state.turn = turn
        if turn >= self.episodes_cfg.turns or not state.open():
            yield beam.pvalue.TaggedOutput(DONE, state)
        else:
            yield state

    def _row(
        self, state: EpisodeState, e: Episode, got: Samples, comp: str, sol: str, v: Verdict
    ) -> dict[str, Any]:
        count(f"verify.{v.status}")
        columns = {**got.columns(0), "turn": self.turn}
        feedback = previous_feedback(e) if self.turn > 1 else None
        return rollout_row(state.item, got, e.index, comp, sol, v, self.run_id, columns, feedback)


def _join(state: EpisodeState, answers: list[tuple[int, Samples]]) -> tuple[EpisodeState, Answers]:
    return state, dict(answers)


def _state_task(state: EpisodeState) -> str:
    return state.item.id


def _by_task(kv: tuple[tuple[str, int], Samples]) -> tuple[str, tuple[int, Samples]]:
    (task_id, episode), samples = kv
    return task_id, (episode, samples)


def _unsplit(kv: tuple[str, Samples]) -> tuple[str, tuple[int, Samples]]:
    return kv[0], (UNSPLIT, kv[1])


class ScoreEpisodesFn(beam.DoFn):
    """Score a finished task at the band turn, or reject it as verify.infra_error."""

    def __init__(self, cfg: EpisodeConfig, band: BandConfig, run_id: str) -> None:
        self.cfg, self.band, self.run_id = cfg, band, run_id

    def process(self, state: EpisodeState) -> Iterator[Any]:
        scored, why, lost = score(state, self.cfg, self.band)
        if lost:
            count("verify.samples_left_out", lost)
        if scored is None:
            yield rejected(
                rejection(
                    stage="verify",
                    reason="verify.infra_error",
                    detail=f"{lost} of {len(state.episodes)} episodes hit an infra error; {why}",
                    run_id=self.run_id,
                    item=state.item,
                    n=len(state.episodes) - lost,
                    n_requested=state.requested,
                )
            )
            return
        log.info("episodes %s: passed by turn %s of %d", state.item.id, scored.k_by_turn, scored.n)
        yield scored


class Episodes(beam.PTransform):
    """Rollouts and Verify for ``turns`` > 1: main output Scored, plus rollouts and rejected."""

    def __init__(
        self,
        sampler: SamplerConfig,
        episodes: EpisodeConfig,
        sandbox: SandboxConfig,
        run_id: str,
        band: BandConfig | None = None,
        retry: RetryPolicy | None = None,
        cache_dir: str | None = None,
    ) -> None:
        super().__init__()
        self.sampler, self.cfg, self.sandbox = sampler, episodes, sandbox
        self.run_id, self.band, self.retry = run_id, band or BandConfig(), retry
        self.cache_dir = (
            cache_dir  # the rollout cache (tasksieve.transforms.rollouts.cache); None: off
        )

    def _verify(self, pcoll: beam.PCollection, turn: int) -> Any:
        fn = TurnFn(self.sandbox, self.run_id, self.cfg, turn, self.retry, self.cache_dir)
        return pcoll | f"Verify{turn}" >> Guarded(
            beam.ParDo(fn), "verify", self.run_id, tags=[ROLLOUTS, DONE]
        )

    def _turn(self, open_states: beam.PCollection, turn: int) -> Any:
        """Turn ``turn`` of the open episodes: one round of one completion per episode."""
        fn = TurnFn(self.sandbox, self.run_id, self.cfg, turn, self.retry, self.cache_dir)
        return open_states | f"Turn{turn}" >> RolloutRound(
            turn_sampler(self.sampler),
            self.run_id,
            requests=functools.partial(turn_requests, turn=turn),
            key=_state_task,
            pair=_join,
            verify=fn,
            tags=[ROLLOUTS, DONE],
            answer=_by_task,
            unsplit=_unsplit,
            cache_dir=self.cache_dir,
        )

    @no_annotations
    def expand(self, items: beam.PCollection) -> dict[str, beam.PCollection]:
        level = self.cfg.feedback
        sampled = items | "Rollouts" >> Rollouts(self.sampler, self.run_id, self.cache_dir)
        first = sampled["ok"] | "Start" >> Guarded(
            beam.Map(first_turn, level), "rollouts", self.run_id
        )
        out = self._verify(first["ok"], 1)
        rows, done = [out[ROLLOUTS]], [out[DONE]]
        rejects = [sampled[REJECTED], first[REJECTED], out[REJECTED]]
        for turn in range(2, self.cfg.turns + 1):
            out = self._turn(out["ok"], turn)
            rows.append(out[ROLLOUTS])
            rejects.append(out[REJECTED])
            done.append(out[DONE])
        finished = done | "Finished" >> beam.Flatten()
        scored = finished | "Score" >> Guarded(
            beam.ParDo(ScoreEpisodesFn(self.cfg, self.band, self.run_id)), "verify", self.run_id
        )
        return {
            "ok": scored["ok"],
            ROLLOUTS: rows | "AllRollouts" >> beam.Flatten(),
            REJECTED: merge_rejected(*rejects, scored[REJECTED], label="AllRejected"),
        }
