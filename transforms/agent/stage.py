"""``AgentEpisodes``: the Rollouts and Verify stages of ``tasksieve curate --agent``.

Tasks are batched (``beam.BatchElements``, up to the sampler's ``batch_size`` tasks); each
batch runs K episodes per task in one ``run_episodes`` call on the worker's sandbox, so the
model answers every open episode of the batch in one call per step and the sandbox steps run
concurrently up to ``AgentConfig.concurrency``. Each episode is its own session, released the
moment the episode ends.

Per task: main output ``Scored`` (k = episodes the verifier passed, n = episodes not lost to
``infra_error``, ``episode_steps`` = the steps of each episode), ``rollouts`` (one row per
episode) and ``trajectories`` (one row per step). A task whose policy failed is rejected as
``rollouts.sampler_error``; one whose band cannot be settled without its lost episodes as
``verify.infra_error``; a task of another family as ``verifier.unsupported``. A batch that
raises rejects its tasks as ``verify.error`` (``transforms.runtime.deadletter``).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import apache_beam as beam
from apache_beam.typehints.decorators import no_annotations

from tasksieve.schemas import RepoSpec
from tasksieve.transforms.agent.config import AgentConfig
from tasksieve.transforms.agent.driver import run_episodes
from tasksieve.transforms.agent.episode import Episode
from tasksieve.transforms.agent.policies import Policy, SamplerPolicy
from tasksieve.transforms.agent.rows import rollout_row, trajectory_rows
from tasksieve.transforms.agent.session import Opener
from tasksieve.transforms.algorithms.settle import band_settled
from tasksieve.transforms.algorithms.stats import BandConfig
from tasksieve.transforms.rollouts.rounds import ROLLOUTS
from tasksieve.transforms.runtime.common import count, rejected
from tasksieve.transforms.runtime.deadletter import Guarded
from tasksieve.transforms.runtime.items import Item, Scored, rejection
from tasksieve.transforms.runtime.worker_sandbox import SandboxDoFn
from tasksieve.transforms.samplers import SamplerConfig
from tasksieve.verifiers import SandboxConfig

TRAJECTORIES = "trajectories"
log = logging.getLogger("tasksieve.agent")


def make_policy(sampler: SamplerConfig, agent: AgentConfig) -> Policy:
    """The policy of a run: tool calling through the openai sampler, else the text protocol."""
    if agent.tools:
        from tasksieve.transforms.agent.tool_policy import OpenAIToolPolicy

        return OpenAIToolPolicy(sampler)
    return SamplerPolicy(sampler)


def score_task(
    item: Item, episodes: list[Episode], requested: int, model_id: str, band: BandConfig
) -> tuple[Scored | None, str]:
    """The task's Scored from its episodes, or None with why (infra errors left it unsettled)."""
    lost = sum(1 for e in episodes if e.verdict is None or e.verdict.status == "infra_error")
    n = len(episodes) - lost
    passing = [(e.index, e.diff) for e in episodes if e.verdict is not None and e.verdict.passed]
    settled, why = band_settled(len(passing), n, lost, band)
    if not settled:
        return None, why
    steps = [len(e.steps) for e in episodes]
    return Scored(item, n, len(passing), model_id, requested, passing, episode_steps=steps), why


class AgentEpisodesFn(SandboxDoFn):
    """Run K episodes for every task of a batch; emit Scored, rollouts and trajectories."""

    def __init__(
        self,
        sampler: SamplerConfig,
        agent: AgentConfig,
        sandbox: SandboxConfig,
        run_id: str,
        band: BandConfig,
    ) -> None:
        super().__init__(sandbox, run_id)
        self.sampler, self.agent, self.band = sampler, agent, band

    def setup(self) -> None:
        super().setup()
        self.policy = make_policy(self.sampler, self.agent)
        self.steps_pool = ThreadPoolExecutor(self.agent.concurrency, thread_name_prefix="agent")
        self.openers: dict[int, Opener] = {}

    def teardown(self) -> None:
        self.policy.close()
        self.steps_pool.shutdown(wait=True)
        super().teardown()

    def _reject(self, item: Item, stage: str, reason: str, detail: str, n: int = 0) -> Any:
        k = self.sampler.samples
        return rejected(
            rejection(
                stage=stage, reason=reason, detail=detail, run_id=self.run_id, item=item, n=n,
                n_requested=k,
            )
        )  # fmt: skip

    def process(self, batch: list[Item]) -> Iterator[Any]:
        k = self.sampler.samples
        ready: list[Item] = []
        verifier: Any = None
        for item in batch:
            found = self.verifier_for(item, "verify", n=0, n_requested=k)
            if isinstance(found, dict):
                yield rejected(found)
            elif not isinstance(item.task.verifier, RepoSpec) or not hasattr(found, "store"):
                why = f"agent episodes need repo tasks (--agent); {item.id} is {item.task.family}"
                yield self._reject(item, "verify", "verifier.unsupported", why)
            else:
                ready.append(item)
                verifier = found
        if not ready:
            return
        opener = self.openers.get(id(verifier))
        if opener is None:  # one per verifier: it caches the environments it resolved
            opener = self.openers[id(verifier)] = Opener(self.sandbox, verifier.store, self.agent)
        jobs = [(item.task, j) for item in ready for j in range(k)]
        episodes = run_episodes(jobs, self.policy, opener, verifier, self.agent, self.steps_pool)
        for i, item in enumerate(ready):
            yield from self._emit(item, episodes[i * k : (i + 1) * k])

    def _episode_rows(self, item: Item, episodes: list[Episode]) -> Iterator[Any]:
        """Count the episodes' endings and steps; each one's trajectory and rollout rows."""
        policy = self.policy
        for ending, n in Counter(e.ending for e in episodes).items():
            count(f"agent.ending.{ending}", n)
        count("agent.episodes", len(episodes))
        count("agent.steps", sum(len(e.steps) for e in episodes))
        for e in episodes:
            for row in trajectory_rows(e, self.run_id, policy.model_id, item.reference_s):
                yield beam.pvalue.TaggedOutput(TRAJECTORIES, row)
            row = rollout_row(e, self.run_id, policy.model_id, policy.name, item.reference_s)
            yield beam.pvalue.TaggedOutput(ROLLOUTS, row)

    def _policy_failure(self, item: Item, episodes: list[Episode]) -> Any | None:
        """The task's rejection when the policy (the sampler) failed in some episode."""
        failed = [e for e in episodes if e.ending == "policy_error"]
        if not failed:
            return None
        detail = failed[0].verdict.detail if failed[0].verdict else "policy error"
        return self._reject(item, "rollouts", "rollouts.sampler_error", detail)

    def _emit(self, item: Item, episodes: list[Episode]) -> Iterator[Any]:
        policy, k = self.policy, self.sampler.samples
        for e in episodes:
            count(f"verify.{e.verdict.status if e.verdict else 'infra_error'}")
        yield from self._episode_rows(item, episodes)
        failure = self._policy_failure(item, episodes)
        if failure is not None:
            yield failure
            return
        scored, why = score_task(item, episodes, k, policy.model_id, self.band)
        if scored is None:
            bad = [e.verdict for e in episodes if e.verdict and e.verdict.status == "infra_error"]
            lost = len(bad)
            first = bad[0].detail if bad else ""
            detail = f"{lost} of {len(episodes)} episodes hit an infra error ({first}); {why}"
            yield self._reject(item, "verify", "verify.infra_error", detail, len(episodes) - lost)
            return
        log.info("agent %s: %d of %d episodes passed", item.id, scored.k, scored.n)
        yield scored


class AgentEpisodes(beam.PTransform):
    """Rollouts and Verify for ``--agent``: main output Scored, plus rollouts, trajectories
    and rejected."""

    def __init__(
        self,
        sampler: SamplerConfig,
        agent: AgentConfig,
        sandbox: SandboxConfig,
        run_id: str,
        band: BandConfig | None = None,
    ) -> None:
        super().__init__()
        self.sampler, self.agent, self.sandbox = sampler, agent, sandbox
        self.run_id, self.band = run_id, band or BandConfig()

    @no_annotations
    def expand(self, items: beam.PCollection) -> dict[str, beam.PCollection]:
        size = max(1, self.sampler.batch_size)
        batches = items | "Batch" >> beam.BatchElements(min_batch_size=1, max_batch_size=size)
        fn = AgentEpisodesFn(self.sampler, self.agent, self.sandbox, self.run_id, self.band)
        out: dict[str, beam.PCollection] = batches | "Episodes" >> Guarded(
            beam.ParDo(fn), "verify", self.run_id, tags=[ROLLOUTS, TRAJECTORIES]
        )
        return out
