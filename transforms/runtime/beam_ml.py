"""Beam's RunInference API, imported without the model manager's torch and scipy.

``apache_beam.ml.inference.base`` (Beam 2.78) imports its ``model_manager`` module at load
time, and that module imports torch and ``scipy.optimize`` at its top: about 1.5 s and
220 MB of resident memory in every process that builds the rollouts stage, whatever the
sampler. Beam needs the model manager only for ``RunInference(..., use_model_manager=True)``,
which this project never passes (and for which Beam imports it again on first use). So the
stages import the API from here, and this module loads ``base`` with ``model_manager``
marked unavailable for that one import, the case Beam's own ``except ImportError`` is there
for. torch is then loaded only by a sampler that runs a model in this process
(``transformers``; vLLM on its workers).

Beam's fallback for that case also drops the ``resource`` module it reads a process's peak
memory with (model-load metrics); it is put back.

A worker process of another runner unpickles Beam's inference ``DoFn``, whose class lives in
``base``, before any module of this project. So the pipelines name this module as a Beam
plugin (``worker_args``): Beam's SDK worker (the multi-process DirectRunner, the portable
runner's workers, Dataflow, Flink, Spark) imports every ``--beam_plugins`` module at start,
before its first bundle. The Dask runner's bundles import it through
``pipeline/curate/dask_bundle.py``. What this does NOT cover: a process that imported
``apache_beam.ml`` before this module (its ``base`` already holds the real ``ModelManager``,
and torch is loaded), and a worker that a runner starts some other way.
"""

from __future__ import annotations

import importlib
import resource
import sys
from collections.abc import Sequence

BASE = "apache_beam.ml.inference.base"
MODEL_MANAGER = "apache_beam.ml.inference.model_manager"
PLUGIN = "tasksieve.transforms.runtime.beam_ml"


def _load_base() -> None:
    if BASE in sys.modules or MODEL_MANAGER in sys.modules:
        return
    sys.modules[MODEL_MANAGER] = None  # type: ignore[assignment]  # import fails here only
    try:
        base = importlib.import_module(BASE)
    finally:
        if MODEL_MANAGER in sys.modules and sys.modules[MODEL_MANAGER] is None:
            del sys.modules[MODEL_MANAGER]
    if getattr(base, "resource", None) is None:  # Beam's fallback set it to None as well
        setattr(base, "resource", resource)  # noqa: B010  (a module attribute mypy cannot see)


_load_base()

from apache_beam.ml.inference.base import (  # noqa: E402  (after the guarded load above)
    KeyedModelHandler,
    ModelHandler,
    RunInference,
)


def worker_args(args: Sequence[str]) -> list[str]:
    """The Beam option that has SDK workers import this module first, unless ``args`` has it."""
    for arg in args:
        name, _, value = arg.partition("=")
        if name in ("--beam_plugin", "--beam_plugins") and PLUGIN in value.split(","):
            return []
    return [f"--beam_plugins={PLUGIN}"]


__all__ = ["PLUGIN", "KeyedModelHandler", "ModelHandler", "RunInference", "worker_args"]
