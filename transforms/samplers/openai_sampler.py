"""Sampler for any OpenAI-compatible server (vLLM, SGLang, TGI, llama.cpp, a hosted API).

Chat completions through the official ``openai`` client, with the same messages as the
transformers sampler (``prompts.render_messages``). Per task, one request asks for all K
samples through ``n``; a server that returns fewer choices (``transformers serve`` ignores
``n`` and returns one) gets one request per missing sample, sample ``j`` seeded with
``request_seed(seed, request, j)`` (the first request uses sample 0's seed), so the same run
asks the same questions whatever the server does with ``n``. A config with ``first_sample``
(an adaptive round) numbers its samples from there: one request for samples 4..7 is seeded
with sample 4's seed, so its completions match a fixed-K run's only where the server
answers one sample per request (a request for ``n`` is one seed, not ``n``).

Up to ``max_concurrency`` requests are in flight per worker (a thread pool around the
synchronous client). Each request has a timeout and its own bounded retries
(``tasksieve.verifiers.http_retry``, the project's one HTTP retry policy: connection errors,
timeouts, 408/409/429 and 5xx, exponential backoff with jitter, Retry-After honoured up to
a stated maximum); the client's own retries are off.
A task any of whose requests finally fails gets ``Samples.error`` (the pipeline rejects it as
``rollouts.sampler_error``) rather than a pass rate from the samples that happened to come
back: a server that times out on long answers would otherwise bias the rate upwards.
What it does NOT do: stream, reuse a prefix cache across tasks, or check that the server
really serves ``model`` (the server decides what a model name means).
"""

from __future__ import annotations

import logging
import os
import random
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from tasksieve.transforms.runtime.beam_ml import ModelHandler
from tasksieve.transforms.runtime.common import count
from tasksieve.transforms.samplers.config import (
    CompletionMeta,
    SamplerConfig,
    SampleRequest,
    Samples,
)
from tasksieve.transforms.samplers.prompts import prompt_hash, render_messages
from tasksieve.transforms.samplers.seeds import request_seed
from tasksieve.verifiers.http_retry import (
    Attempts,
    Failure,
    HttpRetryPolicy,
    RetriesExhausted,
    call_with_retries,
    is_retryable_status,
    parse_retry_after,
)

_EXTRA = "pip install 'tasksieve[openai]'"
_LOG = logging.getLogger(__name__)
_NO_KEY = "none"  # the client insists on a key; local servers ignore it
_DETAIL_CHARS = 300


def _need_openai() -> Any:
    try:
        import openai
    except ImportError as e:
        raise ImportError(f"the openai sampler needs the openai client: {_EXTRA}") from e
    return openai


@dataclass
class Connection:
    """The client and the pool of request threads, made once per worker."""

    client: Any
    pool: ThreadPoolExecutor
    policy: HttpRetryPolicy
    rng: random.Random = field(default_factory=random.Random)


@dataclass
class Drawn:
    """Completions of one request, in choice order, with how the request went."""

    texts: list[str]
    meta: list[CompletionMeta]
    attempts: Attempts


@dataclass
class TaskState:
    """One task's completions by sample index while its requests come back."""

    req: SampleRequest
    hash: str
    by_index: dict[int, tuple[str, CompletionMeta]] = field(default_factory=dict)
    error: str | None = None
    failed_requests: int = 0


@dataclass
class Tally:
    """Counts from one batch, added to the Beam counters by the calling thread.

    Beam's metrics live in the thread running the DoFn; the request threads only tally.
    """

    requests: int = 0
    retries: int = 0
    failed_requests: int = 0
    failed_tasks: int = 0
    n_ignored: int = 0
    backend: str = "openai"  # counters are named rollouts.<backend>.*

    def publish(self) -> None:
        """Add this tally to the run's counters (the manifest's stage_counters)."""
        for name, value in (
            ("requests", self.requests),
            ("retries", self.retries),
            ("failed_requests", self.failed_requests),
            ("failed_tasks", self.failed_tasks),
            ("n_ignored", self.n_ignored),
        ):
            if value:
                count(f"rollouts.{self.backend}.{name}", value)


def api_key(env_var: str | None) -> str:
    """The API key from ``env_var``; ``_NO_KEY`` when none is named (local servers need no key,
    but the ``openai`` client refuses to start without a non-empty one)."""
    if not env_var:
        return _NO_KEY
    value = os.environ.get(env_var, "")
    if not value:
        raise ValueError(f"--api-key-env {env_var}: the environment variable is not set")
    return value


def to_failure(exc: Exception, timeout_s: float) -> Failure | None:
    """Map an ``openai`` exception onto a retry ``Failure`` (None: not a request failure)."""
    openai = _need_openai()
    if isinstance(exc, openai.APITimeoutError):
        return Failure(f"timed out after {timeout_s:g}s", retryable=True)
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__ or exc
        return Failure(f"connection error: {type(cause).__name__}: {cause}", retryable=True)
    if isinstance(exc, openai.APIStatusError):
        headers = exc.response.headers
        wait_s = parse_retry_after(headers.get("retry-after"))
        if (ms := parse_retry_after(headers.get("retry-after-ms"))) is not None:
            wait_s = ms / 1000
        text = f"HTTP {exc.status_code}: {exc.message}"[:_DETAIL_CHARS]
        return Failure(text, retryable=is_retryable_status(exc.status_code), retry_after_s=wait_s)
    if isinstance(exc, openai.APIError):  # e.g. a response body that is not a completion
        return Failure(f"{type(exc).__name__}: {exc}"[:_DETAIL_CHARS], retryable=False)
    return None


def request_kwargs(cfg: SamplerConfig, req: SampleRequest, n: int, seed: int) -> dict[str, Any]:
    """Keyword arguments of ``chat.completions.create`` for ``n`` samples of ``req``."""
    kwargs: dict[str, Any] = {
        "model": cfg.model,
        "messages": render_messages(req),
        "n": n,
        "temperature": cfg.temperature,
        "top_p": cfg.top_p,
        "max_tokens": cfg.max_new_tokens,
        "seed": seed,
    }
    if cfg.stop:
        kwargs["stop"] = list(cfg.stop)
    extra = cfg.extra_body_dict()
    if extra:
        kwargs["extra_body"] = extra
    return kwargs


def draw(conn: Connection, cfg: SamplerConfig, state: TaskState, n: int, seed: int) -> Drawn:
    """One request (with its retries) for ``n`` samples; raises RetriesExhausted."""
    kwargs = request_kwargs(cfg, state.req, n, seed)

    def attempt() -> tuple[Any, float]:
        start = time.monotonic()
        try:
            response = conn.client.chat.completions.create(**kwargs)
        except Exception as exc:
            failure = to_failure(exc, cfg.request_timeout_s)
            if failure is None:
                raise
            raise failure from exc
        if not response.choices:
            raise Failure("the server returned no choices", retryable=False)
        return response, time.monotonic() - start

    (response, latency), attempts = call_with_retries(attempt, conn.policy, rng=conn.rng)
    texts = [choice.message.content or "" for choice in list(response.choices)[:n]]
    return to_drawn(cfg, state, response, texts, latency, seed, attempts)


def to_drawn(
    cfg: SamplerConfig,
    state: TaskState,
    response: Any,
    texts: list[str],
    latency: float,
    seed: int,
    attempts: Attempts,
) -> Drawn:
    """``Drawn`` from a chat or text completion response and the texts of its first choices."""
    usage = response.usage
    # usage counts all choices of a response: per completion only when there is one
    per_choice = usage.completion_tokens if usage and len(response.choices) == 1 else None
    meta: list[CompletionMeta] = []
    for choice in list(response.choices)[: len(texts)]:
        meta.append(
            CompletionMeta(
                prompt_hash=state.hash,
                turn=state.req.turn,
                temperature=cfg.temperature,
                top_p=cfg.top_p,
                seed=seed,
                max_tokens=cfg.max_new_tokens,
                prompt_tokens=usage.prompt_tokens if usage else None,
                completion_tokens=per_choice,
                finish_reason=choice.finish_reason,
                latency_s=round(latency, 4),
            )
        )
    return Drawn(texts, meta, attempts)


Draw = Callable[[Connection, SamplerConfig, TaskState, int, int], Drawn]
"""One request for ``n`` samples of a task with a seed: ``draw`` here, or another server's."""


def sample_tasks(
    conn: Connection,
    cfg: SamplerConfig,
    requests: Sequence[SampleRequest],
    draw_fn: Draw | None = None,
    hash_fn: Callable[[SampleRequest], str] | None = None,
) -> tuple[list[Samples], Tally]:
    """K completions per request (or an error), in request order, and the batch's tally.

    ``draw_fn`` sends one request (default ``draw``: chat completions through ``conn.client``);
    ``hash_fn`` is the prompt hash of a request (default: of its chat messages).
    """
    k, tally = cfg.samples, Tally(backend=cfg.backend)
    draw_fn = draw_fn or draw
    hash_fn = hash_fn or (lambda r: prompt_hash(render_messages(r)))
    states = [TaskState(r, hash_fn(r)) for r in requests]
    pending: dict[Future[Drawn], tuple[TaskState, int, int]] = {}

    def submit(state: TaskState, first_index: int, n: int) -> None:
        seed = request_seed(cfg.seed, state.req, cfg.first_sample + first_index)
        future = conn.pool.submit(draw_fn, conn, cfg, state, n, seed)
        pending[future] = (state, first_index, n)

    for state in states:
        submit(state, 0, k)
    while pending:
        done, _ = wait(list(pending), return_when=FIRST_COMPLETED)
        for future in done:
            state, first, n = pending.pop(future)
            tally.requests += 1
            try:
                drawn = future.result()
            except RetriesExhausted as exc:
                tally.retries += exc.attempts.retries
                tally.failed_requests += 1
                state.failed_requests += 1
                if state.error is None:
                    state.error = str(exc)
                continue
            tally.retries += drawn.attempts.retries
            for offset, (text, meta) in enumerate(zip(drawn.texts, drawn.meta, strict=True)):
                state.by_index[first + offset] = (text, meta)
            if first == 0 and len(drawn.texts) < n:  # the server ignored n: one per sample
                tally.n_ignored += 1
                for j in range(len(drawn.texts), k):
                    submit(state, j, 1)
    out = [_samples(cfg, s) for s in states]
    tally.failed_tasks = sum(s.error is not None for s in states)
    return out, tally


def _samples(cfg: SamplerConfig, state: TaskState) -> Samples:
    ordered = [state.by_index[i] for i in sorted(state.by_index)]
    error = None
    if state.error is not None:
        error = (
            f"{state.failed_requests} request(s) failed for good "
            f"({len(ordered)} of {cfg.samples} samples came back): {state.error}"
        )
    return Samples(
        task_id=state.req.task_id,
        completions=[text for text, _ in ordered],
        model_id=cfg.model or "",
        sampler=cfg.backend,
        requested=cfg.samples,
        meta=[meta for _, meta in ordered],
        error=error,
    )


class OpenAIModelHandler(ModelHandler[SampleRequest, Samples, Connection]):
    """Draw K completions per task from an OpenAI-compatible server."""

    def __init__(self, cfg: SamplerConfig) -> None:
        if cfg.backend != "openai" or not cfg.endpoint or not cfg.model:
            raise ValueError("OpenAIModelHandler needs backend 'openai', endpoint and model")
        super().__init__(min_batch_size=1, max_batch_size=self._max_batch(cfg))
        self._cfg = cfg

    @staticmethod
    def _max_batch(cfg: SamplerConfig) -> int:
        return max(cfg.batch_size, cfg.max_concurrency)

    def batch_elements_kwargs(self) -> Mapping[str, Any]:
        """Batches big enough to keep ``max_concurrency`` requests in flight."""
        return {"min_batch_size": 1, "max_batch_size": self._max_batch(self._cfg)}

    def model_id(self) -> str:
        """The model name sent to the server and recorded with every sample."""
        return self._cfg.model or ""

    def load_model(self) -> Connection:
        """Make the client (no request is sent) and the request threads."""
        openai = _need_openai()
        cfg = self._cfg
        client = openai.OpenAI(
            base_url=cfg.endpoint,
            api_key=api_key(cfg.api_key_env),
            timeout=cfg.request_timeout_s,
            max_retries=0,  # retries are ours (counted, bounded, honouring Retry-After)
        )
        pool = ThreadPoolExecutor(max_workers=cfg.max_concurrency, thread_name_prefix="openai")
        _LOG.info("openai sampler: %s, %d in flight", cfg.endpoint, cfg.max_concurrency)
        return Connection(client, pool, HttpRetryPolicy(max_attempts=cfg.max_attempts))

    def run_inference(
        self,
        batch: Sequence[SampleRequest],
        model: Connection,
        inference_args: dict[str, Any] | None = None,
    ) -> Iterable[Samples]:
        """One ``Samples`` per request, in request order; failures become ``Samples.error``."""
        out, tally = sample_tasks(model, self._cfg, batch)
        tally.publish()
        for samples in out:
            if samples.error:
                _LOG.warning("%s: sampler error: %s", samples.task_id, samples.error)
        return out
