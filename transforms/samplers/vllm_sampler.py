"""Sampler on vLLM through Beam's own handlers (``apache_beam.ml.inference.vllm_inference``).

Beam's ``VLLMChatModelHandler`` / ``VLLMCompletionsModelHandler`` own the server: their
``load_model`` starts ``python -m vllm.entrypoints.openai.api_server --model M --port P``
plus the extra flags (``--vllm-arg``), waits for it, restarts it when it dies, and, as they
share the model across processes, runs one server per worker machine for all its SDK
processes. Their ``run_inference`` sends the requests with the ``openai`` client.

This module only adapts them to the sampler contract (``SampleRequest`` -> ``Samples``, the
same rollout columns as the ``openai`` sampler): per task one request asks for the K samples
through ``n`` with the task's seed, with the sampling parameters as request arguments; a server
that returns fewer choices gets one request per missing sample (``openai_sampler.sample_tasks``
does that, with the same retries, counters ``rollouts.vllm.*`` and ``Samples.error`` for a task
whose requests fail for good). Beam's ``run_inference`` takes one set of request arguments per
call, so each request is its own call, ``max_concurrency`` of them in flight per worker (the
server batches them). The chat API sends the chat messages; the completions API sends them
rendered as plain text (for base models), hashed as that text.

The GPU goes on this step alone: ``get_resource_hints`` returns the ``accelerator`` hint, which
``RunInference`` puts on its inference ``ParDo``; the other stages keep the default workers.
A server that does not start (Beam tries four times) or cannot be restarted stops the run with
``VLLMServerError``, naming the command line.
What it does NOT do: honour per-request client retries of its own (Beam's client retries twice
before a failure reaches ours), report per-sample token counts when the server answers several
choices at once (the usage is per request), or bound how long Beam waits for a server that
neither answers nor exits (Beam's own limit, 600 s per start attempt). When the server dies,
each request in flight runs Beam's reconnect check; Beam does not lock those against each
other, so a request may meet the server half restarted: that failure is retried like a
connection error.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from tasksieve.transforms.runtime.beam_ml import ModelHandler
from tasksieve.transforms.samplers.config import SamplerConfig, SampleRequest, Samples
from tasksieve.transforms.samplers.openai_sampler import (
    Connection,
    Drawn,
    Failure,
    TaskState,
    sample_tasks,
    to_drawn,
    to_failure,
)
from tasksieve.transforms.samplers.prompts import prompt_hash, render_messages
from tasksieve.transforms.samplers.vllm_args import VLLMServerError, server_kwargs
from tasksieve.verifiers.http_retry import HttpRetryPolicy, call_with_retries

_EXTRA = "pip install 'tasksieve[openai]' (and 'tasksieve[gpu]' on the workers)"
_LOG = logging.getLogger(__name__)
_BEAM_SERVER_FAILED = "vLLM server"  # in the message of Beam's plain Exception on a dead server


def _beam_vllm() -> Any:
    try:
        from apache_beam.ml.inference import vllm_inference
    except ImportError as e:  # it imports the openai client at import time
        raise ImportError(f"the vllm sampler needs the openai client: {_EXTRA}") from e
    return vllm_inference


def render_text(req: SampleRequest) -> str:
    """The chat messages as one plain-text prompt, for the completions API."""
    return "\n\n".join(m["content"] for m in render_messages(req)) + "\n"


def request_hash(api: str, req: SampleRequest) -> str:
    """The prompt hash of ``req``: of its chat messages, or of the text the completions API gets."""
    if api == "chat":
        return prompt_hash(render_messages(req))
    return prompt_hash([{"role": "text", "content": render_text(req)}])


def sampling_args(cfg: SamplerConfig, n: int, seed: int) -> dict[str, Any]:
    """Request arguments (Beam's ``inference_args``) for ``n`` samples with ``seed``."""
    args: dict[str, Any] = {
        "n": n,
        "temperature": cfg.temperature,
        "top_p": cfg.top_p,
        "max_tokens": cfg.max_new_tokens,
        "seed": seed,
        "timeout": cfg.request_timeout_s,
    }
    if cfg.stop:
        args["stop"] = list(cfg.stop)
    extra = cfg.extra_body_dict()
    if extra:
        args["extra_body"] = extra
    return args


def server_command(cfg: SamplerConfig) -> str:
    """The server command line Beam runs, for error messages (the port is Beam's choice)."""
    flags = [
        f"--{k}" if v is None else f"--{k} {v}" for k, v in server_kwargs(cfg.vllm_args).items()
    ]
    return " ".join(
        ["python -m vllm.entrypoints.openai.api_server --model", str(cfg.model), "--port P", *flags]
    )


def server_error(cfg: SamplerConfig, exc: BaseException) -> VLLMServerError:
    """A ``VLLMServerError`` naming the command line and what Beam said."""
    return VLLMServerError(
        f"the vLLM server did not start or could not be restarted: `{server_command(cfg)}` "
        f"({exc}). Check the --vllm-arg flags and --model, that vLLM is installed where the "
        f"sampling step runs ({_EXTRA}), and the server's output in that worker's log "
        "(Beam logs it at INFO)"
    )


@dataclass
class BeamCall:
    """Beam's handler and its loaded server: what ``draw`` sends requests through."""

    handler: Any  # VLLMChatModelHandler or VLLMCompletionsModelHandler
    server: Any  # Beam's _VLLMModelServer, or its proxy when shared across processes
    api: str


def draw(conn: Connection, cfg: SamplerConfig, state: TaskState, n: int, seed: int) -> Drawn:
    """One request for ``n`` samples through Beam's handler, with retries; may raise
    ``RetriesExhausted`` (this task) or ``VLLMServerError`` (the whole run)."""
    call: BeamCall = conn.client
    vllm = _beam_vllm()
    if call.api == "chat":
        element: Any = [
            vllm.OpenAIChatMessage(m["role"], m["content"]) for m in render_messages(state.req)
        ]
    else:
        element = render_text(state.req)
    args = sampling_args(cfg, n, seed)

    def attempt() -> tuple[Any, float]:
        start = time.monotonic()
        try:
            (result,) = call.handler.run_inference([element], call.server, args)
        except Exception as exc:
            failure = to_failure(exc, cfg.request_timeout_s)
            if failure is not None:
                raise failure from exc
            if type(exc) is Exception and _BEAM_SERVER_FAILED in str(exc):
                raise server_error(cfg, exc) from exc
            # e.g. the server object seen mid-restart by a concurrent request: try again
            raise Failure(f"{type(exc).__name__}: {exc}"[:300], retryable=True) from exc
        response = result.inference
        if not response.choices:
            raise Failure("the server returned no choices", retryable=False)
        return response, time.monotonic() - start

    (response, latency), attempts = call_with_retries(attempt, conn.policy, rng=conn.rng)
    choices = list(response.choices)[:n]
    if call.api == "chat":
        texts = [c.message.content or "" for c in choices]
    else:
        texts = [c.text or "" for c in choices]
    return to_drawn(cfg, state, response, texts, latency, seed, attempts)


class VLLMModelHandler(ModelHandler[SampleRequest, Samples, Any]):
    """K completions per task from vLLM, through Beam's vLLM handler (see the module doc)."""

    def __init__(self, cfg: SamplerConfig) -> None:
        if cfg.backend != "vllm" or not cfg.model:
            raise ValueError("VLLMModelHandler needs backend 'vllm' and a model")
        super().__init__()
        self._cfg = cfg
        vllm = _beam_vllm()
        kwargs = server_kwargs(cfg.vllm_args)
        if cfg.vllm_api == "chat":
            self._beam = vllm.VLLMChatModelHandler(cfg.model, vllm_server_kwargs=kwargs)
        else:
            self._beam = vllm.VLLMCompletionsModelHandler(cfg.model, vllm_server_kwargs=kwargs)
        self._pool: ThreadPoolExecutor | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_pool"] = None  # threads do not travel; each worker makes its own
        return state

    def _max_batch(self) -> int:
        return max(self._cfg.batch_size, self._cfg.max_concurrency)

    def batch_elements_kwargs(self) -> Mapping[str, Any]:
        """Batches big enough to keep ``max_concurrency`` requests in flight."""
        return {"min_batch_size": 1, "max_batch_size": self._max_batch()}

    def model_id(self) -> str:
        """The model vLLM serves (recorded with every sample)."""
        return self._cfg.model or ""

    def get_resource_hints(self) -> dict[str, Any]:
        """``{"accelerator": ...}`` when one is set: RunInference puts it on its inference step."""
        return {"accelerator": self._cfg.accelerator} if self._cfg.accelerator else {}

    def share_model_across_processes(self) -> bool:
        """As Beam's handler: one server per worker machine."""
        return bool(self._beam.share_model_across_processes())

    def model_copies(self) -> int:
        return int(self._beam.model_copies())

    def load_model(self) -> Any:
        """Beam's handler starts the server and waits until it serves the model."""
        _LOG.info("vllm sampler: starting %s", server_command(self._cfg))
        try:
            return self._beam.load_model()
        except Exception as exc:
            raise server_error(self._cfg, exc) from exc

    def run_inference(
        self,
        batch: Sequence[SampleRequest],
        model: Any,
        inference_args: dict[str, Any] | None = None,
    ) -> Iterable[Samples]:
        """One ``Samples`` per request, in request order; failed requests become
        ``Samples.error``, a server that cannot be restarted ``VLLMServerError``."""
        cfg = self._cfg
        if self._pool is None:
            self._pool = ThreadPoolExecutor(cfg.max_concurrency, thread_name_prefix="vllm")
        conn = Connection(
            BeamCall(self._beam, model, cfg.vllm_api),
            self._pool,
            HttpRetryPolicy(max_attempts=cfg.max_attempts),
        )
        out, tally = sample_tasks(
            conn, cfg, batch, draw_fn=draw, hash_fn=lambda r: request_hash(cfg.vllm_api, r)
        )
        tally.publish()
        for samples in out:
            if samples.error:
                _LOG.warning("%s: sampler error: %s", samples.task_id, samples.error)
        return out
