"""One rollout round: sample the requests, join the answers to what asked, verify them.

Every rollout path is built of ``RolloutRound``s: the one-shot ``Rollouts`` is one round
without its verify step (``Verify`` follows as a stage of its own), adaptive rollouts are one
round per round of samples, multi-turn episodes one round per turn after the first. A round
takes a PCollection of the path's elements (an ``Item``, an adaptive ``(Item, Progress)``,
an ``EpisodeState``) and the path says, as plain functions:

- ``requests(element)``: the ``(key, SampleRequest)`` pairs to sample (one per task, or one
  per open episode keyed ``(task id, episode)``);
- ``key(element)``: the element's task id, which the answers are joined on;
- ``answer((key, Samples))``: an answer keyed by task id (default: as it is), and
  ``unsplit((task id, error Samples))`` for the error Samples of a failed request or batch;
- ``pair(element, answers)``: what the verify step takes.

Sampling goes through ``Sample`` (RunInference of the sampler behind the rollout cache,
``transforms.rollouts.cache``, and the sampler guard, ``transforms.rollouts.guard``, on a
sampling thread of its own while the stages before it go on: ``transforms.rollouts.ahead``), so a
sampler that raises fails only the tasks it raised on; a request, join or verify step that
raises on a task rejects it as ``rollouts.error`` or ``verify.error``
(``transforms.runtime.deadletter``). The verify step is the path's ``VerifySamplesFn`` subclass
(``transforms.rollouts.rounds``), one per-worker sandbox for all (``SandboxDoFn``).

Outputs: ``ok`` (what verify emits, or the pairs when there is no verify step), the verify
step's ``tags`` and ``rejected``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import apache_beam as beam
from apache_beam.typehints.decorators import no_annotations

from tasksieve.schemas import CodeSpec
from tasksieve.transforms.rollouts.ahead import AheadRunInference
from tasksieve.transforms.rollouts.cache.sampler import wrap_handler
from tasksieve.transforms.rollouts.guard import Isolating, KeyedSampler, failed_samples
from tasksieve.transforms.runtime.common import REJECTED
from tasksieve.transforms.runtime.deadletter import DEAD, Attempt, Guarded, merge_rejected
from tasksieve.transforms.runtime.items import Item
from tasksieve.transforms.samplers import (
    SamplerConfig,
    SampleRequest,
    Samples,
    make_model_handler,
)
from tasksieve.verifiers.families.repo.prompt import render_prompt

Requests = Callable[[Any], Iterable[tuple[Any, SampleRequest]]]
Answer = Callable[[tuple[Any, Samples]], tuple[str, Any]]


def sample_request(item: Item) -> SampleRequest:
    """The request for a task's first attempt: its prompt (and entry point, for code)."""
    spec = item.task.verifier
    entry = spec.entry_point if isinstance(spec, CodeSpec) else None
    return SampleRequest(item.id, item.task.family, render_prompt(item.task), entry)


def task_request(item: Item) -> list[tuple[str, SampleRequest]]:
    """One request keyed by the task id (the one-shot and adaptive paths)."""
    return [(item.id, sample_request(item))]


class Sample(beam.PTransform):
    """RunInference of the sampler behind the rollout cache and the sampler guard, each batch
    sampled on a thread of its own (``transforms.rollouts.ahead``).

    Input: ``(key, SampleRequest)`` pairs (the one-shot path and adaptive rounds key by task
    id, later turns by (task id, episode)). Outputs ``ok``: ``(key, Samples)``, error Samples
    for a request the sampler failed on alone (``Isolating``); ``failed``: ``(task_id, error
    Samples)`` for every task of what RunInference's exception handling caught.
    """

    def __init__(self, cfg: SamplerConfig, cache_dir: str | None = None) -> None:
        super().__init__()
        self.cfg = cfg
        self.cache_dir = cache_dir

    @no_annotations
    def expand(self, requests: beam.PCollection) -> dict[str, beam.PCollection]:
        cfg = self.cfg
        handler = KeyedSampler(
            Isolating(wrap_handler(make_model_handler(cfg), cfg, self.cache_dir), cfg), cfg
        )
        sampled, failed = requests | "Run" >> AheadRunInference(handler).with_exception_handling()
        dead = [failed.failed_inferences, *failed.failed_preprocessing]
        dead += failed.failed_postprocessing
        errors = (
            tuple(d | f"Failed{i}" >> beam.FlatMap(failed_samples, cfg) for i, d in enumerate(dead))
            | "AllFailed" >> beam.Flatten()
        )
        return {"ok": sampled, "failed": errors}


def _pair_all(
    kv: tuple[str, dict[str, Iterable[Any]]], pair: Callable[[Any, list[Any]], Any]
) -> Iterator[Any]:
    groups = kv[1]
    answers = list(groups["answers"])
    for element in groups["element"]:  # exactly one: task ids are unique after validation
        yield pair(element, answers)


class RolloutRound(beam.PTransform):
    """Sample ``requests(element)``, join the answers to their element, verify the pairs."""

    def __init__(
        self,
        sampler: SamplerConfig,
        run_id: str,
        *,
        requests: Requests,
        key: Callable[[Any], str],
        pair: Callable[[Any, list[Any]], Any],
        verify: beam.DoFn | None = None,
        tags: Sequence[str] = (),
        answer: Answer | None = None,
        unsplit: Answer | None = None,
        cache_dir: str | None = None,
    ) -> None:
        super().__init__()
        self.sampler = sampler
        self.run_id = run_id
        self.requests, self.key, self.pair = requests, key, pair
        self.verify, self.tags = verify, tuple(tags)
        self.answer, self.unsplit = answer, unsplit
        self.cache_dir = cache_dir  # the rollout cache (transforms.rollouts.cache); None: off

    def _answers(self, elements: beam.PCollection) -> beam.PCollection:
        """``(task id, answer)`` for every request of ``elements``, failed ones included."""
        cfg = self.sampler
        requests = elements | "Request" >> Attempt(beam.FlatMap(self.requests), "rollouts")
        sampled = requests["ok"] | "Sample" >> Sample(cfg, self.cache_dir)
        ok, failed = (
            sampled["ok"],
            (
                sampled["failed"],
                requests[DEAD] | "RequestFailed" >> beam.FlatMap(failed_samples, cfg),
            )
            | "AllFailed" >> beam.Flatten(),
        )
        if self.answer is not None:
            ok = ok | "Answer" >> beam.Map(self.answer)
        if self.unsplit is not None:
            failed = failed | "Unsplit" >> beam.Map(self.unsplit)
        return (ok, failed) | "AllAnswers" >> beam.Flatten()

    @no_annotations
    def expand(self, elements: beam.PCollection) -> dict[str, beam.PCollection]:
        paired = (
            {
                "element": elements | "Key" >> beam.Map(lambda e, key: (key(e), e), self.key),
                "answers": self._answers(elements),
            }
            | "Join" >> beam.CoGroupByKey()
            | "Pair" >> Guarded(beam.FlatMap(_pair_all, self.pair), "rollouts", self.run_id)
        )
        if self.verify is None:
            return paired
        out = paired["ok"] | "Verify" >> Guarded(
            beam.ParDo(self.verify), "verify", self.run_id, tags=self.tags
        )
        return {
            **out,
            REJECTED: merge_rejected(paired[REJECTED], out[REJECTED], label="AllRejected"),
        }
