"""Content keys of the rollout cache: what a completion and a verdict depend on.

A sample key hashes the sampling request (every field of ``SampleRequest``, so a field added to it
later, such as a conversation history, enters the key without a change here), the chat messages
rendered from it (so a new per-family system instruction or prompt layout after an upgrade misses
instead of reusing old completions), the model, every ``SamplerConfig`` field that can change what
is drawn, the seed and the sample index. The number of samples K is not part of it: sample j is
keyed on its own, so a re-run asking for fewer samples reuses the first ones (a re-run asking for
more draws the task again). Nor is ``first_sample``: the index is the sample's index in the task's
run (``first_sample + j`` for the j-th of a request), so sample i has one key whether an adaptive
round or a fixed-K run drew it. A verdict key hashes the task (its verifier spec with the tests, its
reference solution), the solution, the sandbox settings that can change a verdict and the tasksieve
version (a new release re-verifies); for the remote backend the settings hold each server's
tasksieve version and sandbox backend, as its ``/healthz`` says.

What the keys do NOT cover: the bytes of a local model directory (``--model DIR`` is keyed by
its path: replace the weights under the same path and pass ``--no-cache``), a server that
changes the model it serves under the same name, and the reference runtime a task's
timeouts are scaled from (it is measured anew every run; a cached ``timeout`` verdict is
reused although this run's measured reference time may differ a little).
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.metadata
import json
from collections.abc import Mapping
from typing import Any

from tasksieve.schemas import TaskRecord
from tasksieve.transforms.samplers.config import SamplerConfig, SampleRequest
from tasksieve.transforms.samplers.prompts import render_messages

KEY_VERSION = 2  # 2: sample keys hold the rendered messages
# SamplerConfig fields that decide how a run talks to the sampler, not what it draws
_NOT_SAMPLING = frozenset(
    {
        "samples",
        "first_sample",  # in the key as the sample's index instead
        "batch_size",
        "cache_dir",
        "max_concurrency",
        "api_key_env",
        "request_timeout_s",
        "max_attempts",
    }
)
# TaskRecord fields no verifier reads
_NOT_VERIFIED = frozenset({"source", "tags", "metadata", "reward"})


def digest(parts: Mapping[str, Any]) -> str:
    """sha256 (hex) of ``parts`` as canonical JSON."""
    blob = json.dumps(parts, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def sampling_params(cfg: SamplerConfig, model: Mapping[str, Any]) -> dict[str, Any]:
    """What of ``cfg`` (and the resolved ``model`` description) decides a completion."""
    params = {
        f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg) if f.name not in _NOT_SAMPLING
    }
    return {**params, "resolved_model": dict(model)}


def sample_key(req: SampleRequest, params: Mapping[str, Any], index: int) -> str:
    """Key of completion ``index`` of ``req`` under ``params`` (from ``sampling_params``);
    ``index`` counts from the task's first sample, not from the request's ``first_sample``."""
    return digest(
        {
            "kind": "sample",
            "v": KEY_VERSION,
            "request": dataclasses.asdict(req),
            "messages": render_messages(req),  # the family's system instruction included
            "params": dict(params),
            "index": index,
        }
    )


def verifier_version() -> str:
    """The installed tasksieve version (verdicts are re-computed after an upgrade)."""
    try:
        return importlib.metadata.version("tasksieve")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def verdict_key(task: TaskRecord, solution: str, sandbox: Mapping[str, Any]) -> str:
    """Key of the verdict of ``solution`` on ``task`` under the ``sandbox`` settings."""
    return digest(
        {
            "kind": "verdict",
            "v": KEY_VERSION,
            "task": task.model_dump(mode="json", exclude=set(_NOT_VERIFIED)),
            "solution": solution,
            "sandbox": dict(sandbox),
            "tasksieve": verifier_version(),
        }
    )
