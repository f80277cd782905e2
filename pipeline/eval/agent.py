"""``tasksieve eval --agent``: curate's agent episodes, scored for an eval instead of a band.

``EvalAgentEpisodes`` runs the very stage ``curate --agent`` runs (``transforms.agent.stage``:
tasks batched, K episodes per task in one ``run_episodes`` call, each in its own workspace,
judged by the repo verifier on the final workspace). What differs is what happens after the
episodes: eval keeps every task it can score, so ``EvalAgentFn`` emits the rollout rows (one
per episode) and trajectory rows (one per step) and rejects a task only when its policy failed
(``rollouts.sampler_error``) or every episode was lost to an infra error
(``verify.infra_error``); no band is judged.

How the episodes become scores (``pipeline.eval.scores``): an episode's rollout row carries
``turn`` = its steps and ``finish_reason`` = its ending, so success by step s (the share of a
task's episodes that passed within s steps) is the multi-turn ``c_by_turn`` with steps for
turns; ``pipeline.eval.agent_scores`` maps endings onto the failure kinds and adds the
steps' sandbox time to the verification's.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import apache_beam as beam
from apache_beam.typehints.decorators import no_annotations

from tasksieve.transforms.agent.config import AgentConfig
from tasksieve.transforms.agent.episode import Episode
from tasksieve.transforms.agent.stage import TRAJECTORIES, AgentEpisodesFn
from tasksieve.transforms.algorithms.stats import BandConfig
from tasksieve.transforms.rollouts.rounds import ROLLOUTS
from tasksieve.transforms.runtime.common import count
from tasksieve.transforms.runtime.deadletter import Guarded
from tasksieve.transforms.runtime.items import Item
from tasksieve.transforms.samplers import SamplerConfig
from tasksieve.verifiers import SandboxConfig


class EvalAgentFn(AgentEpisodesFn):
    """The agent stage's DoFn that scores no band: every episode's rows, few rejections."""

    def __init__(
        self, sampler: SamplerConfig, agent: AgentConfig, sandbox: SandboxConfig, run_id: str
    ) -> None:
        super().__init__(sampler, agent, sandbox, run_id, BandConfig())

    def _emit(self, item: Item, episodes: list[Episode]) -> Iterator[Any]:
        yield from self._episode_rows(item, episodes)
        failure = self._policy_failure(item, episodes)
        if failure is not None:
            yield failure
            return
        lost = [e for e in episodes if e.verdict is None or e.verdict.status == "infra_error"]
        if lost:
            count("verify.samples_left_out", len(lost))
        if len(lost) == len(episodes):
            first = lost[0].verdict.detail if lost[0].verdict else "no verdict"
            detail = f"all {len(episodes)} episodes hit an infra error ({first[:300]})"
            yield self._reject(item, "verify", "verify.infra_error", detail)


class EvalAgentEpisodes(beam.PTransform):
    """Agent episodes for eval: outputs ``rollouts``, ``trajectories`` and ``rejected``."""

    def __init__(
        self, sampler: SamplerConfig, agent: AgentConfig, sandbox: SandboxConfig, run_id: str
    ) -> None:
        super().__init__()
        self.sampler, self.agent, self.sandbox, self.run_id = sampler, agent, sandbox, run_id

    @no_annotations
    def expand(self, items: beam.PCollection) -> dict[str, beam.PCollection]:
        size = max(1, self.sampler.batch_size)
        batches = items | "Batch" >> beam.BatchElements(min_batch_size=1, max_batch_size=size)
        fn = EvalAgentFn(self.sampler, self.agent, self.sandbox, self.run_id)
        out: dict[str, beam.PCollection] = batches | "Episodes" >> Guarded(
            beam.ParDo(fn), "verify", self.run_id, tags=[ROLLOUTS, TRAJECTORIES]
        )
        return out
