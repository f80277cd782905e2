"""A ModelHandler that serves cached completions and asks the wrapped sampler for the rest.

A task is a hit when every one of its K sample keys is cached; otherwise the whole task is
sent to the wrapped sampler and its completions are stored (one new part file per batch,
written before the batch is handed on, so a crash later in the run keeps them). A task the
sampler failed (``Samples.error``) is not stored. The wrapped sampler's model is loaded only
when a batch has a miss, so a fully cached re-run loads no model and sends no request.

Counters: ``cache.sample_hits`` and ``cache.sample_misses`` (samples), ``cache.tasks_sampled``
(tasks sent to the sampler), ``cache.corrupt_entries`` (lines skipped while loading).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from apache_beam.io.filesystems import FileSystems

from tasksieve.transforms.rollouts.cache.keys import sample_key, sampling_params
from tasksieve.transforms.rollouts.cache.store import SAMPLES, load, write_part
from tasksieve.transforms.runtime.beam_ml import ModelHandler
from tasksieve.transforms.runtime.common import count
from tasksieve.transforms.samplers import SamplerConfig, SampleRequest, Samples, model_id
from tasksieve.transforms.samplers.config import CompletionMeta
from tasksieve.transforms.samplers.errors import SamplerUnavailable

log = logging.getLogger("tasksieve.rollout_cache")


def model_description(cfg: SamplerConfig) -> dict[str, Any]:
    """The model part of a sample key: its id, and for a replay file its size and mtime."""
    out: dict[str, Any] = {"id": model_id(cfg)}
    if cfg.backend == "replay" and cfg.replay_path:
        try:
            meta = FileSystems.match([cfg.replay_path])[0].metadata_list
        except Exception:  # not found: the sampler reports it when it loads
            meta = []
        if meta:
            out["size"] = meta[0].size_in_bytes
            out["mtime"] = meta[0].last_updated_in_seconds
    return out


class CachedModel:
    """The loaded cache of one worker process, and the wrapped model once it is needed."""

    def __init__(self, inner: ModelHandler[SampleRequest, Samples, Any], root: str) -> None:
        self.inner = inner
        self.root = root
        self.entries, self.corrupt = load(root, SAMPLES)
        self._model: Any = None
        self._loaded = False
        self._lock = threading.Lock()

    def report_corrupt(self) -> None:
        """Count the corrupt entries met while loading, once (setup has no metrics context)."""
        with self._lock:
            corrupt, self.corrupt = self.corrupt, 0
        if corrupt:
            count("cache.corrupt_entries", corrupt)

    def model(self) -> Any:
        """The wrapped sampler's model, loaded on first use (once per worker process)."""
        with self._lock:
            if not self._loaded:
                try:
                    self._model = self.inner.load_model()
                except SamplerUnavailable:
                    raise
                except Exception as exc:  # the run stops: no task could be sampled
                    raise SamplerUnavailable(
                        f"the sampler's model could not be loaded: {type(exc).__name__}: {exc}"
                    ) from exc
                self._loaded = True
        return self._model


def to_entry(samples: Samples, index: int) -> dict[str, Any]:
    meta = samples.meta[index].columns() if index < len(samples.meta) else None
    return {
        "completion": samples.completions[index],
        "meta": meta,
        "model_id": samples.model_id,
        "sampler": samples.sampler,
    }


def from_entries(req: SampleRequest, entries: list[Any], requested: int) -> Samples | None:
    """``Samples`` rebuilt from cached entries; None when one is malformed (then re-drawn)."""
    try:
        comps = [str(e["completion"]) for e in entries]
        metas = [CompletionMeta(**e["meta"]) for e in entries if e.get("meta") is not None]
        return Samples(
            task_id=req.task_id,
            completions=comps,
            model_id=str(entries[0]["model_id"]),
            sampler=str(entries[0]["sampler"]),
            requested=requested,
            meta=metas if len(metas) == len(comps) else [],
        )
    except (KeyError, TypeError, IndexError):
        return None


class CachedModelHandler(ModelHandler[SampleRequest, Samples, CachedModel]):
    """Wrap a sampler ModelHandler with the rollout cache at ``root``."""

    def __init__(
        self, inner: ModelHandler[SampleRequest, Samples, Any], cfg: SamplerConfig, root: str
    ) -> None:
        super().__init__()
        self.inner = inner
        self.cfg = cfg
        self.root = root
        self.params = sampling_params(cfg, model_description(cfg))

    def batch_elements_kwargs(self) -> Mapping[str, Any]:
        return self.inner.batch_elements_kwargs()

    def share_model_across_processes(self) -> bool:
        return False  # wrap_handler leaves samplers that share their model unwrapped

    def get_resource_hints(self) -> dict[str, Any]:
        return self.inner.get_resource_hints()  # e.g. the vLLM sampler's accelerator

    def set_environment_vars(self) -> None:
        self.inner.set_environment_vars()

    def load_model(self) -> CachedModel:
        """Load the cached samples (the wrapped model waits for the first miss)."""
        return CachedModel(self.inner, self.root)

    def keys(self, req: SampleRequest) -> list[str]:
        """The keys of the samples ``req`` asks for: indices ``first_sample`` on."""
        first = self.cfg.first_sample
        return [sample_key(req, self.params, first + j) for j in range(self.cfg.samples)]

    def run_inference(
        self,
        batch: Sequence[SampleRequest],
        model: CachedModel,
        inference_args: dict[str, Any] | None = None,
    ) -> Iterable[Samples]:
        """Cached ``Samples`` for hits, the wrapped sampler's for the rest, in request order."""
        model.report_corrupt()
        k = self.cfg.samples
        out: list[Samples | None] = []
        missed: list[int] = []
        for i, req in enumerate(batch):
            keys = self.keys(req)
            hit = None
            if all(key in model.entries for key in keys):
                hit = from_entries(req, [model.entries[key] for key in keys], k)
            out.append(hit)
            if hit is None:
                missed.append(i)
        if len(missed) < len(batch):
            count("cache.sample_hits", k * (len(batch) - len(missed)))
        if missed:
            count("cache.sample_misses", k * len(missed))
            count("cache.tasks_sampled", len(missed))
            drawn = list(
                self.inner.run_inference([batch[i] for i in missed], model.model(), inference_args)
            )
            self._store(batch, missed, drawn)
            for i, samples in zip(missed, drawn, strict=True):
                out[i] = samples
        return [s for s in out if s is not None]

    def _store(
        self, batch: Sequence[SampleRequest], missed: list[int], drawn: list[Samples]
    ) -> None:
        """Store the completions just drawn as one new part (a failed write is only logged)."""
        entries: dict[str, Any] = {}
        for i, samples in zip(missed, drawn, strict=True):
            if samples.error is not None:
                continue
            keys = self.keys(batch[i])
            for j in range(min(len(samples.completions), len(keys))):
                entries[keys[j]] = to_entry(samples, j)
        try:
            write_part(self.root, SAMPLES, entries)
        except Exception as exc:  # a full disk must not lose the samples already drawn
            count("cache.write_errors")
            log.warning("rollout cache: could not store %d samples: %s", len(entries), exc)


def wrap_handler(
    inner: ModelHandler[SampleRequest, Samples, Any], cfg: SamplerConfig, root: str | None
) -> ModelHandler[SampleRequest, Samples, Any]:
    """``inner`` behind the cache at ``root`` (None: ``inner`` itself).

    A sampler whose model is shared by every process of a worker machine (the vLLM server,
    through Beam's multi-process sharing) is left unwrapped: the cache's model is per process
    and would start one server per process. Such a run samples every time (logged)."""
    if root is None:
        return inner
    if inner.share_model_across_processes():
        log.warning(
            "rollout cache: off for the %s sampler (one model shared across processes)",
            cfg.backend,
        )
        return inner
    return CachedModelHandler(inner, cfg, root)
