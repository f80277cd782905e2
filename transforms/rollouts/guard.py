"""Sampler faults become ``rollouts.sampler_error`` rejections of their tasks, not a failed run.

Two layers, both ending as ``Samples`` with ``error`` set (``VerifyFn`` rejects such a task as
``rollouts.sampler_error`` with the text, as it does for a server that kept failing):

- ``Isolating`` wraps the sampler's ModelHandler: when ``run_inference`` raises on a batch, it
  runs each request of the batch alone, so only the tasks that fail on their own are lost and
  their batch-mates are sampled as usual. A second failure of a request is its error.
- ``RunInference(...).with_exception_handling()`` catches what still escapes (a batch the
  keyed handler cannot split or zip back): ``failed_samples`` turns each task of such a
  batch, and each request that could not be built, into its error ``Samples``. A batch
  sampled on the sampling thread (``transforms.rollouts.ahead``) fails there instead, and
  ``KeyedSampler.failed_batch`` makes the same error ``Samples`` for its tasks.
Counter ``rollouts.sampler_errors``: one per task that ends with an error this way (apart from
``rollouts.errors``, which counts the ``rollouts.error`` rejections of the stage's own steps).

It does NOT guard against a model that cannot be loaded (``load_model`` runs in the DoFn's
setup, or on the first cache miss; ``SamplerUnavailable`` stops the run) or a sampler that
hangs (no timeout here; the openai backend has its own request timeouts). Re-running a
failed batch one request at a time costs a model call per request: cheap next to a run that
stops.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from tasksieve.transforms.runtime.beam_ml import KeyedModelHandler, ModelHandler
from tasksieve.transforms.runtime.common import count
from tasksieve.transforms.runtime.deadletter import (
    BeamError,
    Fault,
    fault_from,
    fault_of,
    records_in,
)
from tasksieve.transforms.samplers import (
    SamplerConfig,
    SampleRequest,
    SamplerUnavailable,
    Samples,
    model_id,
)

log = logging.getLogger("tasksieve.rollouts")
STAGE = "rollouts"


def error_samples(task_id: str, fault: Fault, cfg: SamplerConfig) -> Samples:
    """The ``Samples`` of a task the sampler failed on (no completion, ``error`` set)."""
    count(f"{STAGE}.sampler_errors")
    log.warning("%s: %s", task_id, fault.summary(who=f"the {cfg.backend} sampler"))
    return Samples(
        task_id=task_id,
        completions=[],
        model_id=model_id(cfg),
        sampler=cfg.backend,
        requested=cfg.samples,
        error=fault.detail(who=f"the {cfg.backend} sampler"),
    )


class Isolating(ModelHandler[SampleRequest, Samples, Any]):
    """A sampler ModelHandler that re-runs a failing batch one request at a time."""

    def __init__(self, inner: ModelHandler[SampleRequest, Samples, Any], cfg: SamplerConfig):
        super().__init__()
        self._inner = inner
        self._cfg = cfg

    def run_inference(
        self,
        batch: Sequence[SampleRequest],
        model: Any,
        inference_args: dict[str, Any] | None = None,
    ) -> Iterable[Samples]:
        """The inner handler's result, or, if it raises, each request's own result or error."""
        try:
            return list(self._inner.run_inference(batch, model, inference_args))
        except SamplerUnavailable:
            raise  # no request would fare better alone: the run stops
        except Exception as exc:
            if len(batch) == 1:
                return [error_samples(batch[0].task_id, fault_of(STAGE, exc), self._cfg)]
            log.warning("sampler failed on a batch of %d (%r); one by one now", len(batch), exc)
        out: list[Samples] = []
        for req in batch:
            try:
                out.extend(self._inner.run_inference([req], model, inference_args))
            except SamplerUnavailable:
                raise
            except Exception as exc:
                out.append(error_samples(req.task_id, fault_of(STAGE, exc), self._cfg))
        return out

    # everything else is the inner handler's
    def load_model(self) -> Any:
        return self._inner.load_model()

    def get_num_bytes(self, batch: Sequence[SampleRequest]) -> int:
        return self._inner.get_num_bytes(batch)

    def get_metrics_namespace(self) -> str:
        return self._inner.get_metrics_namespace()

    def get_resource_hints(self) -> dict[str, Any]:
        return self._inner.get_resource_hints()

    def batch_elements_kwargs(self) -> Mapping[str, Any]:
        return self._inner.batch_elements_kwargs()

    def validate_inference_args(self, inference_args: dict[str, Any] | None) -> None:
        self._inner.validate_inference_args(inference_args)

    def update_model_path(self, model_path: str | None = None) -> None:
        self._inner.update_model_path(model_path)

    def get_preprocess_fns(self) -> Iterable[Callable[[Any], Any]]:
        return self._inner.get_preprocess_fns()

    def get_postprocess_fns(self) -> Iterable[Callable[[Any], Any]]:
        return self._inner.get_postprocess_fns()

    def should_skip_batching(self) -> bool:
        return self._inner.should_skip_batching()

    def set_environment_vars(self) -> None:
        self._inner.set_environment_vars()

    def share_model_across_processes(self) -> bool:
        return self._inner.share_model_across_processes()

    def model_copies(self) -> int:
        return self._inner.model_copies()

    def override_metrics(self, metrics_namespace: str = "") -> bool:
        return self._inner.override_metrics(metrics_namespace)

    def should_garbage_collect_on_timeout(self) -> bool:
        return self._inner.should_garbage_collect_on_timeout()


class KeyedSampler(KeyedModelHandler):
    """The keyed sampler handler of ``Sample``: a failed batch becomes its tasks' errors.

    ``failed_batch`` is what the sampling thread of ``transforms.rollouts.ahead`` emits for a
    batch whose call raised past ``Isolating``: each ``(key, request)``'s error ``Samples``,
    as ``failed_samples`` makes them from Beam's dead letters. ``SamplerUnavailable`` is
    raised again: the run stops.
    """

    def __init__(self, unkeyed: ModelHandler[SampleRequest, Samples, Any], cfg: SamplerConfig):
        super().__init__(unkeyed)
        self._cfg = cfg

    def failed_batch(
        self, batch: Sequence[tuple[Any, SampleRequest]], exc: Exception
    ) -> list[tuple[Any, Samples]]:
        if isinstance(exc, SamplerUnavailable):
            raise exc
        fault = fault_of(STAGE, exc)
        return [(key, error_samples(req.task_id, fault, self._cfg)) for key, req in batch]


def _task_ids(element: Any) -> list[str]:
    """The task ids in a failed element: a request or samples (keyed), a batch of them, or
    an item."""
    if isinstance(element, SampleRequest | Samples):
        return [element.task_id]
    if isinstance(element, tuple | list):
        return [tid for x in element for tid in _task_ids(x)]
    return [r.id for r in records_in(element) if hasattr(r, "id")]


def failed_samples(
    dead: tuple[Any, Fault | BeamError], cfg: SamplerConfig
) -> Iterator[tuple[str, Samples]]:
    """``(task_id, error Samples)`` for every task of a failed request or batch; the error is
    a ``Fault`` or what Beam's exception handling recorded."""
    element, error = dead
    if not isinstance(error, Fault) and issubclass(error[0], SamplerUnavailable):
        raise SamplerUnavailable(fault_from(STAGE, error).message)  # the run stops
    fault = error if isinstance(error, Fault) else fault_from(STAGE, error)
    seen: set[str] = set()
    for tid in _task_ids(element):
        if tid not in seen:
            seen.add(tid)
            yield tid, error_samples(tid, fault, cfg)
